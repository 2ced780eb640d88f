// weft/task.hpp — task<T>, the lazy coroutine type every weft API speaks.
//
// A task is a coroutine that has not started: nothing runs until it is
// awaited, spawned or given to runtime::block_on. It is move-only and owns its
// frame until then; awaiting it hands the frame a continuation and transfers to
// it, and its final suspend transfers back. Transfers go through
// detail::transfer, so a chain of a million nested awaits uses constant stack
// under every compiler and sanitizer (see detail/context.hpp).
//
// A task whose promise has no continuation when it finishes is the root of a
// task_context (spawned, or a when_all/timeout child): its final suspend hands
// the frame to the context's owner, which takes the result and destroys it.
//
// Tasks that await each other are linked (promise_base::parent and owner,
// and the context's `top`), so that a cancelled strand can be stopped: its
// frames destroyed one by one from the innermost, without resuming any of
// them (detail/context.hpp).
#pragma once

#include <cassert>
#include <coroutine>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include <weft/detail/block_pool.hpp>
#include <weft/detail/context.hpp>

namespace weft {

template <class T = void>
class task;

namespace detail {

// Tells the root's owner that its coroutine finished; defined in lib/.
void finish_root(task_context* ctx) noexcept;

struct promise_base {
  std::coroutine_handle<> continuation;
  // The weft coroutine awaiting this one; null for a root, or when a foreign
  // coroutine awaits it. Stopping walks these links (context.hpp).
  promise_base* parent = nullptr;
  union {
    task_context* root_of = nullptr;  // a root: the context it is the root of
    std::coroutine_handle<>* owner;   // awaited: the task object in the awaiter's frame that owns us
  };
  std::exception_ptr error;

  // Frames come from the per-thread block pool: spawning a million small
  // tasks should not be a million trips through the general allocator.
  static void* operator new(std::size_t bytes) { return pool_allocate(bytes); }
  static void operator delete(void* p, std::size_t bytes) noexcept { pool_deallocate(p, bytes); }

  std::suspend_always initial_suspend() noexcept { return {}; }

  struct final_awaiter {
    bool await_ready() const noexcept { return false; }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
      promise_base& p = h.promise();
      if (p.continuation) {
        thread_state& ts = this_thread();
        if (ts.current != nullptr) ts.current->top = p.parent;  // the awaiter is innermost again
        return transfer(ts, p.continuation);
      }
      // A root: the owner destroys this frame inside finish_root, so nothing
      // of the frame (this awaiter included) may be touched after the call.
      finish_root(p.root_of);
      return std::noop_coroutine();
    }
    void await_resume() const noexcept {}
  };
  final_awaiter final_suspend() noexcept { return {}; }
  void unhandled_exception() noexcept { error = std::current_exception(); }

  void rethrow_if_error() {
    if (error) std::rethrow_exception(error);
  }
};

template <class T>
struct task_promise final : promise_base {
  // Manual storage: a variant would add an index word to every frame.
  union {
    T value;
  };
  bool has_value = false;

  task_promise() noexcept {}
  ~task_promise() {
    if (has_value) value.~T();
  }
  task<T> get_return_object() noexcept;

  template <class U = T>
    requires std::is_convertible_v<U&&, T>
  void return_value(U&& v) noexcept(std::is_nothrow_constructible_v<T, U&&>) {
    ::new (static_cast<void*>(std::addressof(value))) T(std::forward<U>(v));
    has_value = true;
  }
  T take() {
    rethrow_if_error();
    assert(has_value);
    return std::move(value);
  }
};

template <class T>
struct task_promise<T&> final : promise_base {
  T* value = nullptr;
  task<T&> get_return_object() noexcept;
  void return_value(T& v) noexcept { value = std::addressof(v); }
  T& take() {
    rethrow_if_error();
    return *value;
  }
};

template <>
struct task_promise<void> final : promise_base {
  task<void> get_return_object() noexcept;
  void return_void() noexcept {}
  void take() { rethrow_if_error(); }
};

}  // namespace detail

template <class T>
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

  // Awaiting hands the frame its continuation and transfers to it. The frame
  // stays owned by this task object (the awaiter points at it) and dies with
  // it, after the awaiting coroutine has taken the result — or, when the
  // strand is stopped, when stop_strand clears this owner and destroys it.
  struct awaiter {
    std::coroutine_handle<>* slot;
    bool await_ready() const noexcept { return !*slot; }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> awaiting) noexcept {
      promise_type& callee = handle_type::from_address(slot->address()).promise();
      callee.continuation = awaiting;
      callee.owner = slot;
      if constexpr (std::is_base_of_v<detail::promise_base, P>) callee.parent = &awaiting.promise();
      detail::thread_state& ts = detail::this_thread();
      if (ts.current != nullptr) ts.current->top = &callee;
      return detail::transfer(ts, *slot);
    }
    T await_resume() {
      if (!*slot) throw std::logic_error("weft: co_await on an empty task (moved from or already awaited)");
      return handle_type::from_address(slot->address()).promise().take();
    }
  };
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
