// tests/never.hpp — a suspension point that nothing but cancellation ends.
//
// It follows the protocol of weft/detail/context.hpp like every weft
// awaitable: parks with a cancel hook, and the hook wakes the task, which
// is then stopped rather than resumed. A task parked here is "never resumed
// otherwise"; if it ever is, await_resume says so.
#pragma once

#include <atomic>
#include <stdexcept>

#include <weft/detail/context.hpp>
#include <weft/errors.hpp>

struct never : weft::detail::cancel_hook {
  static inline std::atomic<int> parked{0};
  weft::detail::task_context* ctx = nullptr;

  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h) {
    ctx = weft::detail::current_context();
    if (weft::detail::stop_if_cancelled(ctx, h)) return true;
    on_cancel = [](weft::detail::cancel_hook* hk) noexcept {
      auto* self = static_cast<never*>(hk);
      --parked;
      weft::detail::wake(self->ctx);
    };
    ctx->resume_point = h;
    ctx->hook = this;
    ++parked;
    return true;
  }
  void await_resume() const { throw std::logic_error("never: a task parked here was resumed, not stopped"); }
};
