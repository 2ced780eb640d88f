// weft/runtime.hpp — the runtime: event-loop threads, each driving its own io_uring.
//
// A runtime starts `loops` threads. Each loop owns an io_uring, a run queue, a
// queue of spawned-but-not-started tasks that idle loops steal from, and an
// inbox for wakes from other threads. A loop with nothing to do sleeps inside
// io_uring_enter; work handed to it from another thread wakes it through an
// eventfd read kept armed on its ring. A task runs on one loop from its first
// resumption until it finishes.
//
// shutdown() refuses new spawns, cancels every live task and waits for them to
// stop; the destructor calls it and joins the threads. Neither may be called
// from one of the runtime's own loop threads with the expectation of waiting:
// shutdown() from a loop thread only starts the shutdown.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

#include <weft/bounded_elastic.hpp>
#include <weft/join_handle.hpp>
#include <weft/scheduled_handle.hpp>
#include <weft/task.hpp>
#include <weft/time.hpp>

namespace weft {

namespace detail {
struct ring_faults;
struct runtime_test_hooks;  // lib/core/runtime_test_hooks.hpp
}  // namespace detail

struct runtime_options {
  unsigned loops = 0;              // event-loop threads; 0 = std::thread::hardware_concurrency() (1 if unknown)
  unsigned ring_entries = 256;     // io_uring submission queue entries per loop
  std::chrono::nanoseconds timer_tick = std::chrono::milliseconds(1);  // width of a level-0 wheel slot, (0, 1 s]
  elastic_options blocking{};      // the pool behind offload()
  std::function<void(std::exception_ptr)> on_error;  // a detached task or periodic job threw; default prints to stderr
};

struct runtime_stats {
  std::uint64_t spawned = 0, completed = 0;
  std::size_t live_tasks = 0;      // spawned and not yet finished
  std::size_t timers = 0;          // armed timers, all loops
  std::vector<std::size_t> queued_per_loop;
};

class runtime {
 public:
  // Throws std::invalid_argument for a bad option (naming it) and
  // std::system_error when an io_uring cannot be set up (naming the cause).
  explicit runtime(runtime_options = {});
  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  // Runs t on the runtime and blocks the calling thread until it finishes.
  // From a non-loop thread; std::logic_error on a loop thread (co_await instead).
  template <class T>
  T block_on(task<T> t) {
    if (on_loop_thread())
      throw std::logic_error("weft: runtime::block_on called on a loop thread; co_await the task instead");
    auto h = spawn(std::move(t));
    return h.join_blocking();
  }

  // From any thread. rejected_execution once shutdown() has begun.
  template <class T>
  join_handle<T> spawn(task<T> t) {
    return detail::spawn_on<T>(impl_.get(), std::move(t));
  }

  // The Spring TaskScheduler surface (see weft/scheduled_handle.hpp for the
  // rules). F is a callable returning void or task<>; weft keeps it alive
  // until the last task it returned has finished. Any thread;
  // rejected_execution once shutdown() has begun.
  template <class F>
    requires detail::schedulable<F>
  scheduled_handle schedule_at(clock::time_point t, F fn) {
    return detail::make_scheduled(impl_.get(), std::move(fn), detail::scheduled_job::kind::once, t, {});
  }
  // Runs at now + first, then every `period` on a fixed grid; period > 0.
  // A first delay already past means now (as ScheduledThreadPoolExecutor
  // treats a negative one): the grid starts then, and no period before it
  // is replayed.
  template <class F>
    requires detail::schedulable<F>
  scheduled_handle schedule_at_fixed_rate(F fn, clock::duration first, clock::duration period,
                                          periodic_error on_error = periodic_error::stop) {
    if (period <= clock::duration::zero())
      throw std::invalid_argument("weft: schedule_at_fixed_rate needs a positive period");
    return detail::make_scheduled(impl_.get(), std::move(fn), detail::scheduled_job::kind::fixed_rate,
                                  detail::deadline_after(std::max(first, clock::duration::zero())), period,
                                  on_error);
  }
  // Runs at now + first (now, if first <= 0), then `delay` after each run
  // ends; delay > 0.
  template <class F>
    requires detail::schedulable<F>
  scheduled_handle schedule_with_fixed_delay(F fn, clock::duration first, clock::duration delay,
                                             periodic_error on_error = periodic_error::stop) {
    if (delay <= clock::duration::zero())
      throw std::invalid_argument("weft: schedule_with_fixed_delay needs a positive delay");
    return detail::make_scheduled(impl_.get(), std::move(fn), detail::scheduled_job::kind::fixed_delay,
                                  detail::deadline_after(std::max(first, clock::duration::zero())), delay,
                                  on_error);
  }

  bounded_elastic& blocking() noexcept;
  unsigned loops() const noexcept;
  // Idempotent: new spawns throw rejected_execution, live tasks are cancelled
  // and awaited (a task awaiting a running offloaded job waits for it), the
  // loops are joined and the pool is shut down and awaited.
  void shutdown();
  // shutdown() that waits at most `limit` (Spring's awaitTermination,
  // Reactor's disposeGracefully). True when everything ended in time. False
  // when work was still running then (say a job blocked in a system call):
  // it is left to finish on its own, and nothing it uses is freed under it —
  // if the runtime is then destroyed, its threads and memory are handed to a
  // detached thread that completes the shutdown when that work ends.
  bool shutdown_for(clock::duration limit);
  runtime_stats stats() const;
  static runtime* current() noexcept;  // nullptr off a loop thread

 private:
  // weft's own tests build a runtime whose rings fail on purpose, and look
  // at its loops, through runtime_test_hooks; faults outlives the runtime.
  friend struct detail::runtime_test_hooks;
  runtime(runtime_options, detail::ring_faults* faults);

  static bool on_loop_thread() noexcept;
  std::unique_ptr<detail::runtime_impl> impl_;
};

}  // namespace weft
