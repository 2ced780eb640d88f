// weft/detail/rooted_context.hpp — a task_context that owns a task<T>'s frame.
//
// The root coroutine of a context has no continuation; when it finishes, the
// context moves its outcome (value or exception) out and destroys the frame
// at once, so a finished task costs only its result until someone takes it.
// A context that stopped (cancelled while parked, or before it ever ran)
// has `stopped` as its outcome; so does a root whose body threw
// weft::cancelled itself.
#pragma once

#include <exception>
#include <memory>
#include <new>
#include <tuple>
#include <type_traits>
#include <utility>

#include <weft/detail/context.hpp>
#include <weft/errors.hpp>
#include <weft/outcome.hpp>
#include <weft/task.hpp>

namespace weft::detail {

// True when `e` holds weft::cancelled.
bool is_cancellation(const std::exception_ptr& e) noexcept;

// Moves a finished root's ending into `out`.
template <class T>
void take_outcome(outcome<T>& out, task_promise<T>& p) noexcept {
  if (p.error) {
    if (is_cancellation(p.error)) outcome_access::set_stopped(out);  // a body that throws cancelled stops
    else outcome_access::set_error(out, p.error);
    return;
  }
  try {
    if constexpr (std::is_void_v<T>) outcome_access::set_value(out);
    else if constexpr (std::is_reference_v<T>) outcome_access::set_value(out, p.value);
    else outcome_access::set_value(out, std::move(p.value));
  } catch (...) {
    outcome_access::set_error(out, std::current_exception());
  }
}

// The root frame is known by its promise (`root_`): resume_point holds the
// root only until the strand first runs (a context dropped unrun is
// destroyed with its root), and a stopped strand is parked deeper.
// The outcome goes to `*out`: a member of the context itself (rooted_context
// below), or a spawned task's join cell, which outlives the context.
template <class T>
struct root_holder : task_context {
  outcome<T>* out = nullptr;

  // Precondition: t holds a coroutine (callers reject an empty task first).
  explicit root_holder(task<T>&& t) noexcept : root_holder(t.release()) {}
  // Takes ownership of a root frame released from its task.
  explicit root_holder(std::coroutine_handle<task_promise<T>> root) noexcept {
    root.promise().root_of = this;
    // Queued from birth: its starter pushes it (or, for a spawned task, the
    // claim runs it), so a cancel that comes first must not queue it too.
    flags.store(queued_bit, std::memory_order_relaxed);
    root_ = &root.promise();
    top = root_;
    resume_point = root;
    finished = &on_finished;
  }
  root_holder(const root_holder&) = delete;
  root_holder& operator=(const root_holder&) = delete;
  ~root_holder() {
    if (resume_point) resume_point.destroy();  // never started (e.g. the runtime refused it)
  }

  static void on_finished(task_context* c, bool stopped) noexcept {
    auto* self = static_cast<root_holder*>(c);
    // resume_point is the root when it finished or never ran, but the
    // innermost parked coroutine when the strand was stopped: go by `root_`.
    self->resume_point = {};
    auto root = std::coroutine_handle<task_promise<T>>::from_promise(*self->root_);
    if (stopped) outcome_access::set_stopped(*self->out);
    else take_outcome(*self->out, root.promise());
    root.destroy();
    if (self->on_outcome) self->on_outcome(self);
  }
  // Set by the owner: the outcome is now in `*out` (the loop that ran its end).
  void (*on_outcome)(root_holder*) noexcept = nullptr;

 private:
  task_promise<T>* root_;
};

// A root whose outcome lives in the context (the children of when_all,
// when_any, timeout and a lease's block).
template <class T>
struct rooted_context : root_holder<T> {
  outcome<T> result;
  explicit rooted_context(task<T>&& t) noexcept : root_holder<T>(std::move(t)) { this->out = &result; }
};

}  // namespace weft::detail
