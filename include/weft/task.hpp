// weft/task.hpp — task<T>, the lazy coroutine type every weft API speaks.
//
// A task is a coroutine that has not started: nothing runs until it is
// awaited, spawned or given to runtime::block_on. It is move-only and owns its
// frame until then. `co_await t` runs it to its end and yields its value, or
// rethrows what it threw; a chain of a million nested awaits uses constant
// stack under every compiler and sanitizer. How (the promise, the transfers,
// the links that let a cancelled strand be stopped) is detail/task_promise.hpp.
#pragma once

#include <coroutine>
#include <utility>

#include <weft/detail/task_promise.hpp>

namespace weft {

template <class T = void>
class [[nodiscard]] task {
 public:
  using promise_type = detail::task_promise<T>;
  using handle_type = std::coroutine_handle<promise_type>;
  using value_type = T;

  task() noexcept = default;
  explicit task(handle_type h) noexcept : h_(h) {}
  task(task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  task& operator=(task&& o) noexcept {
    if (this != &o) {
      if (h_) h_.destroy();
      h_ = std::exchange(o.h_, {});
    }
    return *this;
  }
  task(const task&) = delete;
  task& operator=(const task&) = delete;
  ~task() {
    if (h_) h_.destroy();
  }

  // True while the task holds a coroutine that has not been handed off.
  explicit operator bool() const noexcept { return static_cast<bool>(h_); }

  // co_await t -> T, or what the task threw, rethrown. The frame stays owned
  // by this task object and dies with it.
  using awaiter = detail::task_awaiter<T>;
  awaiter operator co_await() & noexcept { return awaiter{&h_}; }
  awaiter operator co_await() && noexcept { return awaiter{&h_}; }

  // Gives up ownership of the frame (spawn and the combinators use this).
  handle_type release() noexcept { return handle_type::from_address(std::exchange(h_, {}).address()); }

 private:
  // Type-erased so that a frame's `owner` can point at it (promise_base).
  std::coroutine_handle<> h_;
};

namespace detail {
template <class T>
task<T> task_promise<T>::get_return_object() noexcept {
  return task<T>(std::coroutine_handle<task_promise<T>>::from_promise(*this));
}
template <class T>
task<T&> task_promise<T&>::get_return_object() noexcept {
  return task<T&>(std::coroutine_handle<task_promise<T&>>::from_promise(*this));
}
inline task<void> task_promise<void>::get_return_object() noexcept {
  return task<void>(std::coroutine_handle<task_promise<void>>::from_promise(*this));
}
}  // namespace detail

}  // namespace weft
