// weft/detail/timer.hpp — the timer node awaitables embed, and the calls that
// arm and disarm one on the current loop's timer wheel (lib/time/timer_wheel.hpp
// holds the wheel itself and its invariants).
//
// A node is intrusive: it lives in its owner (a sleeping coroutine's frame, a
// scheduled job), so arming allocates nothing. It is armed on the calling
// loop's wheel and stays there; any loop of the runtime may disarm it, and
// `fire` runs on whichever loop advances that wheel past the deadline (the
// owner, or a peer standing in for a busy owner), under the wheel's lock,
// after the node was removed from the wheel. So a disarm that returns false
// has waited for the fire to finish, and the node may go at once.
#pragma once

#include <cassert>
#include <chrono>
#include <cstdint>

namespace weft {

using clock = std::chrono::steady_clock;

namespace detail {

class timer_wheel;
class loop;

// Links of an intrusive circular list. Slot heads are bare links (sentinels);
// nodes derive from it so the same pointers thread both.
struct timer_link {
  timer_link* prev = nullptr;
  timer_link* next = nullptr;
};

// One armed-or-not timer. The owner sets `fire` and keeps the node alive and
// in place while it is armed; the wheel owns the links and the sequence.
// Copying copies deadline and fire, never the arming.
struct timer_node : private timer_link {
  std::int64_t deadline = 0;  // ns on the steady clock's epoch; written by insert()
  void (*fire)(timer_node*) noexcept = nullptr;  // for the owner; the wheel never calls it
  loop* owner = nullptr;  // whose wheel it was last armed on (arm_timer)

  timer_node() noexcept = default;
  timer_node(const timer_node& other) noexcept
      : timer_link{}, deadline(other.deadline), fire(other.fire) {}
  timer_node& operator=(const timer_node& other) noexcept {
    assert(!armed() && "assigning over an armed timer_node would orphan its links");
    deadline = other.deadline;
    fire = other.fire;
    return *this;
  }
  // An armed node dying leaves the wheel pointing into freed memory.
  ~timer_node() { assert(!armed() && "a timer_node must be removed before its storage ends"); }

  // Only under the wheel's lock, or where no other thread can fire or
  // disarm the node: use disarm_timer()'s result elsewhere.
  bool armed() const noexcept { return next != nullptr; }

 private:
  friend class timer_wheel;
  std::uint64_t seq_ = 0;  // arm order; breaks ties between equal deadlines
};


// Arms n on the current loop's wheel for `deadline` (time_point::max() is
// "never": clamped to the wheel's horizon, and cancellable). O(1), no
// allocation. Loop threads only; n must not be armed already, and a timer
// callback must not arm on the wheel it runs from.
void arm_timer(timer_node* n, clock::time_point deadline) noexcept;
// Arms n on `on`'s wheel instead (the scheduler keeps every job on one wheel
// so that equal due times fire in the order they were armed).
void arm_timer_on(loop& on, timer_node* n, clock::time_point deadline) noexcept;
// Removes n if armed; O(1); any loop thread. True when it was armed: it will
// not fire. False when it had fired (its callback has returned) or was never
// armed. Must not be called from a timer callback of the same wheel.
bool disarm_timer(timer_node* n) noexcept;

}  // namespace detail
}  // namespace weft
