// weft/yield.hpp — yield(): let the rest of the loop run.
//
// The task goes to the back of its own loop's run queue (it is never moved to
// another loop by a yield), and runs again only after the loop has looked at
// its timers and io_uring completions once: a task that yields in a loop
// cannot starve a timer, and a deadline that passed while it computed is
// noticed at its yield. yield is a cancellation point: a task cancelled
// before or while it yields throws weft::cancelled from the co_await.
#pragma once

#include <coroutine>
#include <stdexcept>

#include <weft/detail/context.hpp>
#include <weft/errors.hpp>

namespace weft {

namespace detail {
struct yield_awaiter {
  task_context* ctx = nullptr;
  bool cancelled_ = false;
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h) {
    ctx = current_context();
    if (ctx == nullptr) throw std::logic_error("weft: yield() outside a weft task");
    if (is_cancelled(ctx)) {
      cancelled_ = true;
      return false;
    }
    ctx->resume_point = h;
    defer(ctx);  // behind everything runnable, and behind due timers and completions
    return true;
  }
  void await_resume() const {
    if (cancelled_ || is_cancelled(ctx)) detail::throw_cancelled();
  }
};
}  // namespace detail

[[nodiscard]] inline detail::yield_awaiter yield() noexcept { return {}; }

}  // namespace weft
