// weft/detail/task_promise.hpp — the coroutine machinery of task<T>
// (task.hpp): its promise, where frames come from, and how one task awaits
// another.
//
// Awaiting a task (task_awaiter) hands the frame a continuation and transfers
// to it, and its final suspend transfers back. Transfers go through
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

template <class T>
class task;  // task.hpp, which gives T its default (void)

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

// What `co_await t` is for a task t. The frame stays owned by the task
// object (the awaiter points at it) and dies with it, after the awaiting
// coroutine has taken the result — or, when the strand is stopped, when
// stop_strand clears this owner and destroys it.
template <class T>
struct task_awaiter {
  using handle_type = std::coroutine_handle<task_promise<T>>;
  std::coroutine_handle<>* slot;  // the task object's frame handle
  bool await_ready() const noexcept { return !*slot; }
  template <class P>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<P> awaiting) noexcept {
    task_promise<T>& callee = handle_type::from_address(slot->address()).promise();
    callee.continuation = awaiting;
    callee.owner = slot;
    if constexpr (std::is_base_of_v<promise_base, P>) callee.parent = &awaiting.promise();
    thread_state& ts = this_thread();
    if (ts.current != nullptr) ts.current->top = &callee;
    return transfer(ts, *slot);
  }
  T await_resume() {
    if (!*slot) throw std::logic_error("weft: co_await on an empty task (moved from or already awaited)");
    return handle_type::from_address(slot->address()).promise().take();
  }
};

}  // namespace detail
}  // namespace weft
