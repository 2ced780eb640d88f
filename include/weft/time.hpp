// weft/time.hpp — sleeping, deadlines and periodic ticks on the loop's timer wheel.
//
// Every timer lives in the timer wheel of the loop that armed it, and its node
// lives in the awaiting coroutine's frame: arming and cancelling allocate
// nothing and cost O(1). The loop waits for time only through one io_uring
// timeout armed for its wheel's earliest expiry. No timer fires before its
// deadline; deadlines are rounded up to the loop's tick (runtime_options::
// timer_tick), so a timer is late by at most about one tick plus scheduling.
//
// Each of these is a cancellation point, even when it does not wait: a
// cancelled task stops there (cancel.hpp).
// Durations and time points saturate: duration::max() means "forever" and
// never overflows.
#pragma once

#include <chrono>
#include <coroutine>
#include <stdexcept>

#include <weft/detail/context.hpp>
#include <weft/detail/deadline_child.hpp>
#include <weft/detail/saturating.hpp>
#include <weft/detail/sleep_awaiter.hpp>
#include <weft/detail/timer.hpp>
#include <weft/errors.hpp>
#include <weft/task.hpp>

namespace weft {

using clock = std::chrono::steady_clock;

// d <= 0: no wait, still a cancellation point.
[[nodiscard]] inline detail::sleep_awaiter sleep_for(clock::duration d) {
  return detail::sleep_awaiter(detail::deadline_after(d));
}
// t in the past: resumes at once.
[[nodiscard]] inline detail::sleep_awaiter sleep_until(clock::time_point t) { return detail::sleep_awaiter(t); }

// Runs t; at the deadline stops it, waits for it to be gone, and throws
// timed_out. If t finishes first its timer is removed at once. Timeouts nest.
// std::invalid_argument at once for an empty task.
template <class T>
task<T> timeout(clock::duration d, task<T> t);

enum class missed_tick { burst, delay, skip };  // Tokio's MissedTickBehavior

// Ticks due at start + first_delay + k·period. When the body overran and ticks
// were missed: `burst` delivers them back to back (each yielding its own due
// time) and stays on the grid; `delay` delivers one at once and restarts the
// grid from that moment; `skip` delivers one at once, then continues at the
// next grid point after now.
class interval {
 public:
  // std::invalid_argument when period <= 0.
  explicit interval(clock::duration period, missed_tick = missed_tick::burst,
                    clock::duration first_delay = clock::duration::zero());

  struct tick_awaiter : detail::sleep_awaiter {
    interval* owner;
    tick_awaiter(interval* i, clock::time_point due) noexcept : sleep_awaiter(due), owner(i) {}
    clock::time_point await_resume() {
      sleep_awaiter::await_resume();
      return owner->delivered(deadline, clock::now());
    }
  };
  // Yields the clock::time_point this tick was due.
  [[nodiscard]] tick_awaiter tick() noexcept { return tick_awaiter(this, next_); }

  clock::duration period() const noexcept { return period_; }
  missed_tick behavior() const noexcept { return mode_; }

  // The next tick's due time after one due at `due` was delivered at `now`
  // (public for tests of the arithmetic; tick() calls it).
  clock::time_point delivered(clock::time_point due, clock::time_point now) noexcept;

 private:
  clock::duration period_;
  missed_tick mode_;
  clock::time_point start_;  // the grid's origin: construction time + first_delay
  clock::time_point next_;
};

// timeout()'s body: t runs as a child strand under the deadline
// (detail/deadline_child.hpp).
namespace detail {
template <class T>
task<T> run_with_deadline(clock::time_point deadline, task<T> t) {
  deadline_child<T> child(std::move(t), deadline);
  co_await child;
  // The policy: only a child that the deadline stopped is a timeout; one
  // that finished (value or exception) as the deadline came keeps its ending.
  if (child.expired() && child.result().stopped()) throw timed_out();
  co_return child.take();
}
}  // namespace detail

template <class T>
task<T> timeout(clock::duration d, task<T> t) {
  if (!t) throw std::invalid_argument("weft: timeout() given an empty task (moved from or already awaited)");
  return detail::run_with_deadline(detail::deadline_after(d), std::move(t));
}

}  // namespace weft
