// weft/detail/deadline_child.hpp — a task run as a child strand under a
// deadline: the one piece timeout() (time.hpp) and a lock's lease
// (detail/run_locked.hpp) are both made of.
//
// The child runs as a context of its own, first on the parent's loop
// (start_local: it starts right behind the parent), then wherever it is
// woken, like any task; its timer stays on the parent's loop's wheel, whose
// lock orders the fire against the child's finish. At the deadline the
// child is cancelled and stops at its suspension point. The parent is woken only once the child has finished and
// no cancel delivery to it is in flight, so the child's context and result,
// which live in the parent's frame, are never touched after the parent moves
// on. A parent cancelled while it waits cancels the child, and is stopped
// itself once the child is gone.
//
// What an expiry means is the caller's policy, read after the await from
// expired() and result(): timeout() throws timed_out only when the deadline
// stopped the child; a lease throws lease_expired whenever it ran out.
#pragma once

#include <coroutine>
#include <stdexcept>
#include <utility>

#include <weft/detail/context.hpp>
#include <weft/detail/rooted_context.hpp>
#include <weft/detail/timer.hpp>
#include <weft/outcome.hpp>
#include <weft/task.hpp>

namespace weft::detail {

template <class T>
class deadline_child : timer_node, cancel_hook {
 public:
  // Precondition: t is not empty (the callers check).
  deadline_child(task<T>&& t, clock::time_point deadline) noexcept
      : child_(std::move(t), this), deadline_(deadline) {
    on_cancel = [](cancel_hook* h) noexcept {
      // The parent was cancelled: so is the child; the parent stops once it is gone.
      request_cancel(&static_cast<deadline_child*>(h)->child_);
    };
    fire = [](timer_node* n) noexcept {
      auto* self = static_cast<deadline_child*>(n);
      self->expired_ = true;
      request_cancel(&self->child_);
    };
  }
  deadline_child(const deadline_child&) = delete;
  deadline_child& operator=(const deadline_child&) = delete;

  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h) {
    parent_ = current_context();
    if (parent_ == nullptr) throw std::logic_error("weft: timeout() or a lease awaited outside a weft task");
    if (stop_if_cancelled(parent_, h)) return true;
    parent_->resume_point = h;
    parent_->hook = this;
    arm_timer(this, deadline_);
    start_local(&child_);
    return true;
  }
  void await_resume() const noexcept {}

  // The deadline came before the child had finished.
  bool expired() const noexcept { return expired_; }
  outcome<T>& result() noexcept { return child_.result; }
  // The child's value, or its ending rethrown.
  T take() { return outcome_access::take(child_.result); }

 private:
  struct child_context final : rooted_context<T> {
    deadline_child* owner;
    child_context(task<T>&& t, deadline_child* o) noexcept : rooted_context<T>(std::move(t)), owner(o) {
      this->quiesced = [](task_context* c) noexcept { static_cast<child_context*>(c)->owner->child_done(); };
    }
  };
  void child_done() noexcept {
    disarm_timer(this);  // finished first: the timer goes at once (or has fired and returned)
    wake(parent_);
  }

  child_context child_;
  task_context* parent_ = nullptr;
  clock::time_point deadline_;
  bool expired_ = false;
};

}  // namespace weft::detail
