// weft/detail/yield_awaiter.hpp — the awaitable of yield() (yield.hpp).
//
// It parks nothing: the context is deferred (context.hpp: defer), queued
// behind everything runnable and behind the loop's next look at its timers
// and completions. So it needs no cancel hook: a cancel that comes while it
// waits in the queue is acted on when the context is taken to be resumed.
#pragma once

#include <coroutine>
#include <stdexcept>

#include <weft/detail/context.hpp>

namespace weft::detail {

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

}  // namespace weft::detail
