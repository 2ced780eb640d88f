// weft/offload.hpp — offload(fn): run blocking work on the current runtime's pool.
//
// co_await offload(fn) is co_await runtime::current()->blocking().run(fn): the
// job runs on a bounded_elastic worker and the task resumes on its own loop
// with the value or exception; cancellation follows bounded_elastic::run
// (a queued job never runs; a running one is asked to stop, then awaited).
// The runtime starts its pool on the first offload, so a runtime that never
// offloads starts no pool thread.
#pragma once

#include <weft/bounded_elastic.hpp>
#include <weft/runtime.hpp>

#include <stdexcept>
#include <utility>

namespace weft {

// Throws std::logic_error off a loop thread (there is no runtime to offload
// to): from a plain thread use bounded_elastic::submit().
template <class F>
  requires detail::job_callable<F>
auto offload(F&& fn) {
  runtime* rt = runtime::current();
  if (!rt) {
    throw std::logic_error(
        "weft: offload() called off a loop thread; from a plain thread use bounded_elastic::submit()");
  }
  return rt->blocking().run(std::forward<F>(fn));
}

}  // namespace weft
