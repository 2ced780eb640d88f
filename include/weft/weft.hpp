// weft/weft.hpp — everything in weft's public API, in one include.
#pragma once

#include <weft/actor_lock.hpp>
#include <weft/bounded_elastic.hpp>
#include <weft/cancel.hpp>
#include <weft/coordinator.hpp>
#include <weft/errors.hpp>
#include <weft/join_handle.hpp>
#include <weft/outcome.hpp>
#include <weft/keyed_lock.hpp>
#include <weft/lock_guard.hpp>
#include <weft/offload.hpp>
#include <weft/runtime.hpp>
#include <weft/scheduled_handle.hpp>
#include <weft/task.hpp>
#include <weft/time.hpp>
#include <weft/when_all.hpp>
#include <weft/yield.hpp>
