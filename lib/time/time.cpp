// lib/time/time.cpp — timers on the current loop's wheel, saturating deadline
// arithmetic, and interval's missed-tick rules (see weft/time.hpp).
#include <weft/time.hpp>

#include <stdexcept>

#include "core/loop.hpp"

namespace weft {

namespace detail {

namespace {
// The wheel counts in ns on the steady clock's epoch; time_point::max() is
// "never", which the wheel clamps to its horizon.
std::int64_t to_ns(clock::time_point t) noexcept { return t.time_since_epoch().count(); }
}  // namespace

void arm_timer(timer_node* n, clock::time_point deadline) noexcept {
  loop* l = this_thread().current_loop;
  assert(l != nullptr && "timers are armed from awaitables, which run on loop threads");
  l->arm_timer(n, to_ns(deadline));
}

void arm_timer_on(loop& on, timer_node* n, clock::time_point deadline) noexcept { on.arm_timer(n, to_ns(deadline)); }

bool disarm_timer(timer_node* n) noexcept { return n->owner != nullptr && n->owner->disarm_timer(n); }

clock::time_point deadline_after(clock::duration d) noexcept { return saturating_add(clock::now(), d); }

}  // namespace detail

interval::interval(clock::duration period, missed_tick mode, clock::duration first_delay)
    : period_(period), mode_(mode) {
  if (period <= clock::duration::zero())
    throw std::invalid_argument("weft: interval period must be positive (a zero period would tick forever at once)");
  start_ = detail::deadline_after(first_delay < clock::duration::zero() ? clock::duration::zero() : first_delay);
  next_ = start_;
}

clock::time_point interval::delivered(clock::time_point due, clock::time_point now) noexcept {
  using detail::saturating_add;
  const clock::time_point on_grid = saturating_add(due, period_);
  if (now < on_grid || mode_ == missed_tick::burst) {
    next_ = on_grid;  // on time, or catching up tick by tick
  } else if (mode_ == missed_tick::delay) {
    next_ = saturating_add(now, period_);
  } else {
    // skip: the first grid point strictly after now. Here now >= on_grid >
    // start_, so `behind` counts whole periods that fit; only the last step
    // can pass the clock's end.
    const auto behind = (now - start_) / period_;
    next_ = saturating_add(saturating_add(start_, behind * period_), period_);
  }
  return due;
}

}  // namespace weft
