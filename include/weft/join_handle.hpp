// weft/join_handle.hpp — spawn() and the handle that joins or cancels a spawned task.
//
// spawn(t) queues t on the calling loop's runtime (runtime::spawn, on any
// runtime from any thread) and returns its join_handle. The task runs
// concurrently, on whichever loop claims it; the handle awaits its end
// (co_await h, co_await h.outcome()), asks it to stop (cancel()), or, when
// destroyed, detaches it: it keeps running, and an exception it throws then
// goes to runtime_options::on_error.
//
// A queued task costs its frame and a small cell; a finished, unjoined one
// costs only the cell, which holds its outcome (detail/join_cell.hpp).
#pragma once

#include <stdexcept>
#include <utility>

#include <weft/detail/join_awaiter.hpp>
#include <weft/detail/join_cell.hpp>
#include <weft/outcome.hpp>
#include <weft/task.hpp>

namespace weft {

template <class T>
class join_handle {
 public:
  join_handle() noexcept = default;
  explicit join_handle(detail::join_cell<T>* s) noexcept : s_(s) {}
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
    if (s_) s_->cancel();
  }
  bool done() const noexcept { return s_ && s_->is_ready(); }

  // Parks the joining task until the task ends. A cancellation point for
  // the joiner: a joiner cancelled while it waits stops (the task goes on).
  template <bool whole>
  using awaiter = detail::join_awaiter<T, whole>;
  // co_await h -> T: the value, the task's exception rethrown, or cancelled
  // when it stopped.
  awaiter<false> operator co_await() noexcept { return awaiter<false>{s_}; }
  // co_await h.outcome() -> outcome<T>: how the task ended, without throwing
  // for its sake (the cheap way to join a task that may have been cancelled).
  [[nodiscard]] awaiter<true> outcome() noexcept { return awaiter<true>{s_}; }

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
  detail::join_cell<T>* s_ = nullptr;
};

// Spawns on the runtime of the calling loop thread; std::logic_error off a loop thread.
template <class T>
join_handle<T> spawn(task<T> t) {
  return detail::spawn_on<T>(nullptr, std::move(t));
}

}  // namespace weft
