// weft/detail/sleep_awaiter.hpp — what sleep_for, sleep_until and
// interval::tick (time.hpp) park on: a timer node armed on the current
// loop's wheel, embedded in the awaiting frame (detail/timer.hpp), and the
// cancel hook that disarms it. Also deadline_after, which turns every
// relative wait in weft into a saturated deadline.
//
// The timer's fire and the cancel hook agree through the wheel on which of
// them wakes the task: a cancel that finds the timer already fired leaves
// the wake to the fire.
#pragma once

#include <coroutine>
#include <stdexcept>

#include <weft/detail/context.hpp>
#include <weft/detail/timer.hpp>

namespace weft::detail {

// Parks the current task until `deadline` (a cancellation point; a deadline
// already past resumes at once). Cancelled while parked, the timer is
// disarmed and the task stops (detail/context.hpp).
struct sleep_awaiter : cancel_hook, timer_node {
  clock::time_point deadline;
  task_context* ctx = nullptr;

  explicit sleep_awaiter(clock::time_point d) noexcept : deadline(d) {
    on_cancel = [](cancel_hook* h) noexcept {
      auto* self = static_cast<sleep_awaiter*>(h);
      // Fired meanwhile (on a peer standing in for the timer's loop): the
      // fire's wake is the one wake.
      if (disarm_timer(self)) wake(self->ctx);
    };
    fire = [](timer_node* n) noexcept { wake(static_cast<sleep_awaiter*>(n)->ctx); };
  }
  sleep_awaiter(const sleep_awaiter& o) noexcept : sleep_awaiter(o.deadline) {}

  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h) {
    ctx = current_context();
    if (ctx == nullptr) throw std::logic_error("weft: sleep awaited outside a weft task");
    if (stop_if_cancelled(ctx, h)) return true;
    if (deadline <= clock::now()) return false;
    ctx->resume_point = h;
    ctx->hook = this;
    arm_timer(this, deadline);
    return true;
  }
  void await_resume() const noexcept {}
};

// now + d, saturating at time_point::max() (and at min() for huge negatives).
clock::time_point deadline_after(clock::duration d) noexcept;

}  // namespace weft::detail
