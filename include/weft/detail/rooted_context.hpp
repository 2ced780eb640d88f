// weft/detail/rooted_context.hpp — a task_context that owns a task<T>'s frame.
//
// The root coroutine of a context has no continuation; when it finishes, the
// context moves its outcome (value or exception) out and destroys the frame
// at once, so a finished task costs only its result until someone
// takes it. A context cancelled before it ever ran gets `cancelled` as its
// outcome and its frame is destroyed unrun.
#pragma once

#include <exception>
#include <memory>
#include <new>
#include <tuple>
#include <type_traits>
#include <utility>

#include <weft/detail/context.hpp>
#include <weft/errors.hpp>
#include <weft/task.hpp>

namespace weft::detail {

// The outcome of a finished strand: a value, or an exception.
template <class T>
struct task_outcome {
  union {
    T value;
  };
  // Whether `value` needs destroying; a trivially destructible T (the common
  // int or pointer result) needs no flag, which keeps a finished task small.
  static constexpr bool tracked = !std::is_trivially_destructible_v<T>;
  [[no_unique_address]] std::conditional_t<tracked, bool, std::tuple<>> has_value{};
  std::exception_ptr error;

  task_outcome() noexcept {}
  ~task_outcome() {
    if constexpr (tracked)
      if (has_value) value.~T();
  }
  void take_from(task_promise<T>& p) noexcept {
    if (p.error) {
      error = p.error;
      return;
    }
    try {
      ::new (static_cast<void*>(std::addressof(value))) T(std::move(p.value));
      if constexpr (tracked) has_value = true;
    } catch (...) {
      error = std::current_exception();
    }
  }
  T take() {
    if (error) std::rethrow_exception(error);
    return std::move(value);
  }
};

template <class T>
struct task_outcome<T&> {
  T* value = nullptr;
  std::exception_ptr error;
  void take_from(task_promise<T&>& p) noexcept {
    if (p.error) error = p.error;
    else value = p.value;
  }
  T& take() {
    if (error) std::rethrow_exception(error);
    return *value;
  }
};

template <>
struct task_outcome<void> {
  std::exception_ptr error;
  void take_from(task_promise<void>& p) noexcept { error = p.error; }
  void take() {
    if (error) std::rethrow_exception(error);
  }
};

// True when `e` holds weft::cancelled (the normal end of a cancelled task,
// which is not worth reporting as an error).
bool is_cancellation(const std::exception_ptr& e) noexcept;

// The root's handle needs no member of its own: resume_point holds it until
// the strand first runs, and the final suspend puts it back there before
// finishing (see promise_base::final_awaiter), so on_finished finds it.
// The outcome goes to `*out`: a member of the context itself (rooted_context
// below), or a spawned task's join cell, which outlives the context.
template <class T>
struct root_holder : task_context {
  task_outcome<T>* out = nullptr;

  // Precondition: t holds a coroutine (callers reject an empty task first).
  explicit root_holder(task<T>&& t) noexcept : root_holder(t.release()) {}
  // Takes ownership of a root frame released from its task.
  explicit root_holder(std::coroutine_handle<task_promise<T>> root) noexcept {
    root.promise().root_of = this;
    resume_point = root;
    finished = &on_finished;
  }
  root_holder(const root_holder&) = delete;
  root_holder& operator=(const root_holder&) = delete;
  ~root_holder() {
    if (resume_point) resume_point.destroy();  // never started (e.g. the runtime refused it)
  }

  static void on_finished(task_context* c, bool ran) noexcept {
    auto* self = static_cast<root_holder*>(c);
    auto root = std::coroutine_handle<task_promise<T>>::from_address(
        std::exchange(self->resume_point, {}).address());
    if (ran) {
      self->out->take_from(root.promise());
    } else {
      self->out->error = cancelled_outcome();
    }
    root.destroy();
    if (self->on_outcome) self->on_outcome(self);
  }
  // Set by the owner: the outcome is now in `*out` (home loop).
  void (*on_outcome)(root_holder*) noexcept = nullptr;
};

// A root whose outcome lives in the context (the children of when_all,
// when_any, timeout and a lease's block).
template <class T>
struct rooted_context : root_holder<T> {
  task_outcome<T> result;
  explicit rooted_context(task<T>&& t) noexcept : root_holder<T>(std::move(t)) { this->out = &result; }
};

}  // namespace weft::detail
