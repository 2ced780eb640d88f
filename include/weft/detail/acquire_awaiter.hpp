// weft/detail/acquire_awaiter.hpp — the awaitable of actor_lock::acquire()
// (and, through keyed_acquire_awaiter, of keyed_lock's): the waiting party
// of the lock actor (detail/lock_actor.hpp).
//
// Its three ways out of a wait race for one `claim` word: the grant (from
// whichever thread drains the actor), its cancel hook (on the loop running
// the waiter) and its acquire timer (on whichever loop fires it). Only the
// winner leads to the wake. A grant the task never took, because it stopped
// first, is released as the awaiter goes, so a lock is never left held by
// nobody. The uncontended acquire takes a free lock in await_ready, one CAS,
// without suspending.
#pragma once

#include <coroutine>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <weft/detail/context.hpp>
#include <weft/detail/lock_actor.hpp>
#include <weft/detail/timer.hpp>
#include <weft/errors.hpp>
#include <weft/lock_guard.hpp>
#include <weft/time.hpp>

namespace weft::detail {

// The one maker of a guard for a grant: lock_guard's adopting constructor is private.
struct lock_access {
  static lock_guard adopt(lock_actor* a, std::uint64_t fence) noexcept { return lock_guard(a, fence); }
};

// "N ms" for messages; duration::max() reads "forever".
std::string describe_duration(clock::duration d);

// The awaitable of acquire(): asks the actor, then parks until the grant, its
// cancellation or its timeout, whichever takes the waiter's claim first.
class acquire_awaiter : lock_waiter, cancel_hook, timer_node {
 public:
  // timeout: clock::duration::max() waits for ever; <= 0 only takes a free lock.
  // lease: clock::duration::max() for none (see lock_actor::arm_lease).
  acquire_awaiter(lock_actor* a, clock::duration timeout, clock::duration lease = clock::duration::max()) noexcept
      : actor_(a), timeout_(timeout), lease_(lease) {
    on_cancel = [](cancel_hook* h) noexcept { static_cast<acquire_awaiter*>(h)->withdraw(cancelled); };
    fire = [](timer_node* t) noexcept { static_cast<acquire_awaiter*>(t)->withdraw(timed_out); };
  }
  acquire_awaiter(const acquire_awaiter&) = delete;
  acquire_awaiter& operator=(const acquire_awaiter&) = delete;
  ~acquire_awaiter() { give_back_unadopted_grant(); }

  // The uncontended path: a task that is not cancelled takes a free lock
  // here, without suspending. Anything else is left to await_suspend.
  bool await_ready() noexcept {
    task_context* c = current_context();
    if (c == nullptr || is_cancelled(c) || !actor_->try_acquire(fence)) return false;
    granted_inline = true;
    return true;
  }

  bool await_suspend(std::coroutine_handle<> h) {
    ctx = current_context();
    if (ctx == nullptr)
      throw std::logic_error("weft: a lock's acquire() was awaited outside a weft task; run it in a task "
                             "(runtime::spawn or runtime::block_on)");
    if (actor_->held_by(ctx))
      throw std::logic_error("weft: this task already holds the lock it asked for again; weft locks are not "
                             "re-entrant, and waiting for itself would deadlock. Release the guard first, or "
                             "take the lock once around everything that needs it");
    if (stop_if_cancelled(ctx, h)) return true;
    // The hook goes in before the ask: once asked we may be granted from
    // another loop at any moment, and a cancel delivered after we suspend
    // must find it. Neither the hook nor the timer can run before we return:
    // both run on this loop.
    ctx->resume_point = h;
    ctx->hook = this;
    actor_->ask(this);
    if (granted_inline) {
      ctx->hook = nullptr;
      return false;
    }
    if (timeout_ != clock::duration::max()) {
      const clock::time_point until = deadline_after(timeout_);
      if (until != clock::time_point::max()) arm_timer(this, until);
    }
    return true;
  }

  lock_guard await_resume() {
    if (granted_inline) return adopt();
    disarm_timer(this);  // granted before the deadline (or it fired and lost to the grant)
    // acquire: pairs with the claim CAS of whoever ended the wait (the wake
    // already orders it; this keeps the read self-evidently safe).
    switch (claim.load(std::memory_order_acquire)) {
      case granted:  // by a drain on another party's stack, which woke us
        return adopt();
      case timed_out:
        throw lock_timeout("weft: the lock was not granted within its acquire timeout of " +
                           describe_duration(timeout_) +
                           "; this waiter has left the queue. Retry, raise the acquire timeout, or "
                           "hold the lock for less time");
      default:
        // Withdrawn by the cancel hook: such a task is stopped, never resumed.
        throw std::logic_error("weft: internal error: a cancelled lock waiter was resumed");
    }
  }

 protected:
  // A grant that the task never took because it stopped first (cancelled
  // after the grant won): the lock is released as the frame goes, so it is
  // never left held by nobody. The actor's reference (keyed_lock) is the
  // caller's to drop.
  void give_back_unadopted_grant() noexcept {
    // acquire: as in await_resume; the stop that destroys us came after the wake.
    if (!adopted_ && !granted_inline && claim.load(std::memory_order_acquire) == granted) {
      adopted_ = true;
      disarm_timer(this);
      actor_->release();
    }
  }

  lock_actor* actor_;

 private:
  // The cancel hook (on the loop that runs the cancelled waiter) or the timer
  // (under its wheel's lock, on whichever loop fires it) tries to end the wait.
  void withdraw(std::uint8_t why) noexcept {
    std::uint8_t expected = pending;
    // acq_rel: one winner between this and the grant on another thread; the
    // loser must not touch what the winner goes on to do.
    if (!claim.compare_exchange_strong(expected, why, std::memory_order_acq_rel, std::memory_order_relaxed))
      return;  // granted first: the grant's wake resumes us with the lock
    // Cancelled: the timer goes (if it is firing right now, this waits for
    // its callback, which lost the claim above and touches nothing more).
    // Timed out: it is the timer, already off its wheel.
    if (why == cancelled) disarm_timer(this);
    actor_->withdraw(this);  // the actor wakes us once we are out of its queue
  }

  lock_guard adopt() noexcept {
    adopted_ = true;
    actor_->set_owner(current_context());
    if (lease_ != clock::duration::max()) actor_->arm_lease(deadline_after(lease_));
    return lock_access::adopt(actor_, fence);
  }

  clock::duration timeout_;
  clock::duration lease_;
  bool adopted_ = false;  // await_resume handed the grant to a lock_guard
};

}  // namespace weft::detail
