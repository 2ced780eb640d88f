// weft/detail/join_awaiter.hpp — the two parties that wait on a join cell
// (detail/join_cell.hpp): a task awaiting a join_handle (join_awaiter), and a
// plain thread in runtime::block_on (blocking_waiter).
//
// A waiter registers in the cell's `joiner` word; the finishing task's
// notify and the joiner's cancel hook agree through that word (one CAS each)
// on which of them wakes it, so a joiner is woken exactly once.
#pragma once

#include <coroutine>
#include <semaphore>
#include <stdexcept>

#include <weft/detail/context.hpp>
#include <weft/detail/join_cell.hpp>

namespace weft::detail {

// co_await h and co_await h.outcome() (join_handle.hpp): parks the joining
// task until the cell's outcome is ready; a cancelled joiner stops. `whole`
// is what await_resume yields: take_outcome() when true, else take().
template <class T, bool whole>
struct join_awaiter final : join_waiter, cancel_hook {
  join_cell<T>* s;
  task_context* ctx = nullptr;

  explicit join_awaiter(join_cell<T>* st) noexcept : s(st) {
    notify = &on_ready;
    on_cancel = &on_cancel_request;
  }
  bool await_ready() const {
    if (!s) throw std::logic_error("weft: co_await on an empty join_handle");
    // A finished task is taken at once, unless the joiner is cancelled: then
    // await_suspend stops it, as at any suspension point.
    task_context* c = current_context();
    return s->is_ready() && (c == nullptr || !is_cancelled(c));
  }
  bool await_suspend(std::coroutine_handle<> h) {
    ctx = current_context();
    if (ctx == nullptr)
      throw std::logic_error("weft: join_handle awaited outside a weft task; use runtime::block_on");
    if (stop_if_cancelled(ctx, h)) return true;
    ctx->resume_point = h;
    ctx->hook = this;
    if (!s->wait(this)) {
      ctx->hook = nullptr;
      return false;
    }
    return true;
  }
  decltype(auto) await_resume() {
    if constexpr (whole) return s->take_outcome();
    else return s->take();
  }
  static void on_ready(join_waiter* w) noexcept {
    auto* self = static_cast<join_awaiter*>(w);
    wake(self->ctx);
  }
  static void on_cancel_request(cancel_hook* hk) noexcept {
    auto* self = static_cast<join_awaiter*>(hk);
    if (self->s->unwait(self)) wake(self->ctx);  // resumed cancelled: it stops
    // else: the task finished first and its notify owns the wake.
  }
};

// A plain thread waiting for a spawned task (runtime::block_on).
struct blocking_waiter final : join_waiter {
  std::binary_semaphore finished{0};
  blocking_waiter() noexcept {
    notify = [](join_waiter* w) noexcept { static_cast<blocking_waiter*>(w)->finished.release(); };
  }
};

}  // namespace weft::detail
