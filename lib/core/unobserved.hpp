// lib/core/unobserved.hpp — where an exception nobody can observe goes.
//
// A detached task that threw (error_sink, lib/core/runtime.cpp) and a fire-and-
// forget pool job that threw (lib/blocking/bounded_elastic.cpp) both end up with an
// exception no caller will see: it goes to the user's handler if there is
// one, and to stderr, naming where it came from, if there is none or the
// handler throws itself (it has nowhere else to throw to). Never throws.
#pragma once

#include <exception>
#include <functional>

namespace weft::detail {

// `from` completes "weft: unobserved exception from ...", e.g. "a detached
// task"; `name`, when given, follows it in quotes (a pool's name).
void report_unobserved(const std::function<void(std::exception_ptr)>& handler, const std::exception_ptr& e,
                       const char* from, const char* name = nullptr) noexcept;

}  // namespace weft::detail
