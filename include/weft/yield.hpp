// weft/yield.hpp — yield(): let the rest of the loop run.
//
// The task goes to the back of its loop's run queue, and runs again only
// after the loop has looked at its timers and io_uring completions once: a
// task that yields in a loop cannot starve a timer, and a deadline that
// passed while it computed is noticed at its yield. Like any runnable task,
// it may be taken by an idle loop meanwhile (detail/context.hpp). yield is a cancellation point: a task cancelled
// before or while it yields stops there (cancel.hpp).
#pragma once

#include <coroutine>
#include <stdexcept>

#include <weft/detail/context.hpp>
#include <weft/errors.hpp>

namespace weft {

namespace detail {
struct yield_awaiter {
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h) {
    task_context* ctx = current_context();
    if (ctx == nullptr) throw std::logic_error("weft: yield() outside a weft task");
    if (stop_if_cancelled(ctx, h)) return true;
    ctx->resume_point = h;
    // Behind everything runnable, and behind due timers and completions. A
    // cancel that comes meanwhile needs no hook: the resumption stops it.
    defer(ctx);
    return true;
  }
  void await_resume() const noexcept {}
};
}  // namespace detail

[[nodiscard]] inline detail::yield_awaiter yield() noexcept { return {}; }

}  // namespace weft
