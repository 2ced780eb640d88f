// weft/join_handle.hpp — spawn() and the handle that joins or cancels a spawned task.
//
// A spawned task is one allocation of its own (spawn_state, below) besides its
// coroutine frame; the frame is destroyed as soon as the task finishes, so a
// finished, unjoined task costs only its result. spawn_state is shared by the
// running strand and the join_handle and freed when both have let go.
//
// The `joiner` word is the rendezvous between the finishing task (on its home
// loop) and whoever joins it (any loop, or a plain thread in block_on):
//   0          nobody is waiting, not finished
//   ready      finished: the outcome may be read
//   detached   the handle was destroyed before the task finished
//   otherwise  a join_waiter* registered by one awaiting party
// Each side moves it with one atomic exchange or CAS, so a finish and a join
// (or a finish and a cancelled join) never both or neither act.
#pragma once

#include <atomic>
#include <cstdint>
#include <semaphore>
#include <stdexcept>
#include <utility>

#include <weft/detail/context.hpp>
#include <weft/detail/rooted_context.hpp>
#include <weft/errors.hpp>
#include <weft/task.hpp>

namespace weft {

class runtime;

namespace detail {

class runtime_impl;

struct join_waiter {
  void (*notify)(join_waiter*) noexcept = nullptr;
};

// `rt`, or the calling loop's runtime when rt is null; std::logic_error off a
// loop thread without a runtime.
runtime_impl* resolve_runtime(runtime_impl* rt);
error_sink* error_sink_of(runtime_impl* rt) noexcept;
// Queue a spawned context on rt; rejected_execution once rt is shutting down.
void spawn_context(runtime_impl* rt, task_context* ctx);

template <class T>
struct spawn_state final : rooted_context<T> {
  static constexpr std::uintptr_t ready = 1;
  static constexpr std::uintptr_t detached = 2;

  // Two owners, the running strand (until quiesced) and the join_handle, are
  // counted in task_context::owner_word.
  bool owns_sink_ref = false;
  bool joined = false;  // the outcome was taken by a join (joining side only)
  std::atomic<std::uintptr_t> joiner{0};
  // Whose on_error hears of an unobserved exception. Borrowed from the
  // runtime (alive until this task finishes); a reference is taken only when
  // the task fails while its handle still exists.
  error_sink* sink = nullptr;

  explicit spawn_state(task<T>&& t) noexcept : rooted_context<T>(std::move(t)) {
    this->owner_word.store(2, std::memory_order_relaxed);
    this->on_outcome = &outcome_ready;
    this->quiesced = &strand_quiesced;
  }

  static void outcome_ready(rooted_context<T>* c) noexcept {
    auto* self = static_cast<spawn_state*>(c);
    // acq_rel: publishes the outcome to the joiner (release) and, when the
    // handle is already gone, sees everything it did before letting go (acquire).
    std::uintptr_t prev = self->joiner.exchange(ready, std::memory_order_acq_rel);
    if (self->result.error) {
      if (prev == detached) {
        if (!is_cancellation(self->result.error)) self->sink->report(self->result.error);
      } else {
        self->sink->add_ref();  // the handle may outlive the runtime
        self->owns_sink_ref = true;
      }
    }
    if (prev != 0 && prev != detached) {
      auto* w = reinterpret_cast<join_waiter*>(prev);
      w->notify(w);
    }
  }
  static void strand_quiesced(task_context* c) noexcept { static_cast<spawn_state*>(c)->drop(); }

  void drop() noexcept {
    // acq_rel: the last owner must see all the other's writes before deleting.
    if (this->owner_word.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      if (owns_sink_ref) sink->drop_ref();
      delete this;
    }
  }

  // Register w to be notified when the outcome is ready; false if it already is.
  bool wait(join_waiter* w) {
    std::uintptr_t expected = 0;
    // acq_rel on success publishes w; acquire on failure sees the outcome.
    if (joiner.compare_exchange_strong(expected, reinterpret_cast<std::uintptr_t>(w),
                                       std::memory_order_acq_rel, std::memory_order_acquire))
      return true;
    if (expected == ready) return false;
    throw std::logic_error("weft: a join_handle is being awaited twice at once; await it from one place");
  }
  // Undo wait(); false if the finishing task already claimed w (it will notify).
  bool unwait(join_waiter* w) noexcept {
    auto expected = reinterpret_cast<std::uintptr_t>(w);
    return joiner.compare_exchange_strong(expected, 0, std::memory_order_acq_rel,
                                          std::memory_order_acquire);
  }
  bool is_ready() const noexcept { return joiner.load(std::memory_order_acquire) == ready; }

  decltype(auto) take() {
    if (joined) throw std::logic_error("weft: join_handle already joined; its result was taken");
    joined = true;
    return this->result.take();
  }

  void detach() noexcept {
    // acq_rel: if the task already finished, we must see its outcome (acquire).
    std::uintptr_t prev = joiner.exchange(detached, std::memory_order_acq_rel);
    if (prev == ready && !joined && this->result.error && !is_cancellation(this->result.error))
      sink->report(this->result.error);
    drop();
  }
};

// A plain thread waiting for a spawned task (runtime::block_on).
struct blocking_waiter final : join_waiter {
  std::binary_semaphore finished{0};
  blocking_waiter() noexcept {
    notify = [](join_waiter* w) noexcept { static_cast<blocking_waiter*>(w)->finished.release(); };
  }
};

}  // namespace detail

template <class T>
class join_handle {
 public:
  join_handle() noexcept = default;
  explicit join_handle(detail::spawn_state<T>* s) noexcept : s_(s) {}
  join_handle(join_handle&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  join_handle& operator=(join_handle&& o) noexcept {
    if (this != &o) {
      reset();
      s_ = std::exchange(o.s_, nullptr);
    }
    return *this;
  }
  join_handle(const join_handle&) = delete;
  join_handle& operator=(const join_handle&) = delete;
  // Detaches: the task keeps running; an exception it throws goes to on_error.
  ~join_handle() { reset(); }

  // Asks the task to stop at its next suspension point. Any thread.
  void cancel() noexcept {
    if (s_) detail::request_cancel(s_);
  }
  bool done() const noexcept { return s_ && s_->is_ready(); }

  struct awaiter final : detail::join_waiter, detail::cancel_hook {
    detail::spawn_state<T>* s;
    detail::task_context* ctx = nullptr;
    bool cancelled_ = false;

    explicit awaiter(detail::spawn_state<T>* st) noexcept : s(st) {
      notify = &on_ready;
      on_cancel = &on_cancel_request;
    }
    bool await_ready() const {
      if (!s) throw std::logic_error("weft: co_await on an empty join_handle");
      return s->is_ready();
    }
    bool await_suspend(std::coroutine_handle<> h) {
      ctx = detail::current_context();
      if (ctx == nullptr)
        throw std::logic_error("weft: join_handle awaited outside a weft task; use runtime::block_on");
      if (detail::is_cancelled(ctx)) {
        cancelled_ = true;
        return false;
      }
      ctx->resume_point = h;
      ctx->hook = this;
      if (!s->wait(this)) {
        ctx->hook = nullptr;
        return false;
      }
      return true;
    }
    decltype(auto) await_resume() {
      if (cancelled_) throw cancelled{};
      return s->take();
    }
    static void on_ready(detail::join_waiter* w) noexcept {
      auto* self = static_cast<awaiter*>(w);
      detail::wake(self->ctx);
    }
    static void on_cancel_request(detail::cancel_hook* hk) noexcept {
      auto* self = static_cast<awaiter*>(hk);
      if (self->s->unwait(self)) {
        self->cancelled_ = true;
        detail::wake(self->ctx);
      }
      // else: the task finished first and its notify owns the wake.
    }
  };
  awaiter operator co_await() noexcept { return awaiter{s_}; }

  // For runtime::block_on: waits on a plain thread and takes the result.
  decltype(auto) join_blocking() {
    if (!s_) throw std::logic_error("weft: join on an empty join_handle");
    detail::blocking_waiter w;
    if (s_->wait(&w)) w.finished.acquire();
    return s_->take();
  }

 private:
  void reset() noexcept {
    if (s_) std::exchange(s_, nullptr)->detach();
  }
  detail::spawn_state<T>* s_ = nullptr;
};

namespace detail {
template <class T>
join_handle<T> spawn_on(runtime_impl* rt, task<T>&& t) {
  if (!t) throw std::invalid_argument("weft: spawn of an empty task (moved from or already awaited)");
  rt = resolve_runtime(rt);
  auto* s = new spawn_state<T>(std::move(t));
  s->sink = error_sink_of(rt);
  try {
    spawn_context(rt, s);
  } catch (...) {
    delete s;  // never queued: the frame dies with it, unrun
    throw;
  }
  return join_handle<T>(s);
}
}  // namespace detail

// Spawns on the runtime of the calling loop thread; std::logic_error off a loop thread.
template <class T>
join_handle<T> spawn(task<T> t) {
  return detail::spawn_on<T>(nullptr, std::move(t));
}

}  // namespace weft
