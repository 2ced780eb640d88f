// weft/actor_lock.hpp — actor_lock: an async, FIFO, fencing lock with acquire
// and lease timeouts.
//
// This lock grants strictly FIFO: waiters are granted in the order they asked,
// directly (a newcomer never barges past a waiter), and each on its own loop.
// It never blocks a thread: acquire suspends the task. The machinery (a
// mailbox actor, no mutex) is described in lock_guard.hpp.
//
//   weft::actor_lock lock;
//   {
//     weft::lock_guard g = co_await lock.acquire();         // waits as long as it takes
//     use(resource, g.fence());
//   }                                                       // released here
//   auto g = co_await lock.acquire(100ms);                  // or throws lock_timeout
//   int n = co_await lock.with([&]() -> weft::task<int> {   // acquire 3 s, lease 3 s
//     co_await write(resource);
//     co_return 1;
//   });
//
// acquire is a cancellation point: a waiter that is cancelled or times out
// leaves the queue at once and is never granted (a cancelled one stops); if
// the grant got there first it wins, and a cancelled task that was granted
// stops at once and gives the lock back as its frame goes. with() runs its
// block holding the lock; when the lease runs out the block is cancelled, the
// lock passes on only after the block has stopped (two holders never
// overlap), and with() throws lease_expired. A block that is a plain function
// (no task) cannot be cancelled: if it overran its lease, its result is
// dropped and with() throws lease_expired all the same, after it returned.
#pragma once

#include <coroutine>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <weft/detail/context.hpp>
#include <weft/detail/deadline_child.hpp>
#include <weft/detail/timer.hpp>
#include <weft/errors.hpp>
#include <weft/lock_guard.hpp>
#include <weft/task.hpp>
#include <weft/time.hpp>

namespace weft {

namespace detail {

// "N ms" for messages; duration::max() reads "forever".
std::string describe_duration(clock::duration d);

// std::invalid_argument naming `who` when the options make no sense (a lease
// that is zero or negative would cancel every block before it starts).
void check_lock_options(const lock_options& opts, const char* who);

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

// What a with() block yields: R for a callable returning task<R> or R.
template <class T>
struct block_traits {
  using value = T;
  static constexpr bool is_task = false;
};
template <class T>
struct block_traits<task<T>> {
  using value = T;
  static constexpr bool is_task = true;
};
template <class F>
using block_call_t = std::invoke_result_t<F&>;
template <class F>
using block_result_t = typename block_traits<block_call_t<F>>::value;

[[noreturn]] void throw_sync_lease_expired(clock::duration lease);

// The body of every with(): acquire (lock_it(timeout) yields the awaitable),
// run the block under the lease, release. The guard is a local, so the lock
// is released as this coroutine ends, before its awaiter resumes, on the
// exceptional path as well; `fn` is a parameter, so it lives in this frame
// until the task it returned has finished.
template <class F, class Locker>
task<block_result_t<F>> run_locked(Locker lock_it, F fn, lock_options opts) {
  using call_t = block_call_t<F>;
  using R = block_result_t<F>;
  check_lock_options(opts, "with()");
  lock_guard held = co_await lock_it(opts.acquire_timeout);
  const clock::time_point until =
      opts.lease_timeout == clock::duration::max() ? clock::time_point::max() : deadline_after(opts.lease_timeout);
  if constexpr (block_traits<call_t>::is_task) {
    call_t block = std::invoke(fn);
    if (!block)
      throw std::invalid_argument("weft: the callable given to with() returned an empty task; return a task "
                                  "that has not been awaited or moved from");
    if (until == clock::time_point::max()) co_return co_await std::move(block);
    deadline_child<R> lease(std::move(block), until);
    co_await lease;
    // The policy: a lease that ran out is lease_expired, however the block
    // ended; the block has stopped (or finished) and the guard below still
    // holds the lock, so two holders never overlap.
    if (lease.expired())
      throw lease_expired("weft: the lock holder overran its lease of " + describe_duration(opts.lease_timeout) +
                          "; its block was stopped, and the lock moved on. Raise "
                          "lock_options::lease_timeout, or do less while holding the lock");
    co_return lease.take();
  } else if constexpr (std::is_void_v<R>) {
    std::invoke(fn);
    if (until != clock::time_point::max() && clock::now() > until) throw_sync_lease_expired(opts.lease_timeout);
  } else {
    R value = std::invoke(fn);
    if (until != clock::time_point::max() && clock::now() > until) throw_sync_lease_expired(opts.lease_timeout);
    co_return static_cast<R&&>(value);
  }
}

}  // namespace detail

class actor_lock {
 public:
  using acquire_awaiter = detail::acquire_awaiter;

  actor_lock() noexcept = default;
  actor_lock(const actor_lock&) = delete;  // waiters and guards point at it
  actor_lock& operator=(const actor_lock&) = delete;
  // Pre: nobody holds or waits for the lock (debug builds assert it).
  ~actor_lock() = default;

  // co_await lock.acquire(t) -> lock_guard. Throws lock_timeout when not
  // granted within t (clock::duration::max(): no limit; t <= 0 takes the
  // lock only if nobody holds it or waits). A task cancelled while it waits
  // stops there. The task that holds the lock asking for it again throws
  // std::logic_error (locks are not re-entrant; it would wait for itself).
  // With a lease, a holder that keeps the guard past it is cancelled: it
  // stops at its next suspension point, its guard is destroyed and the lock
  // moves on (a holder that never suspends keeps it; moving the guard ends
  // the lease). std::invalid_argument for a lease that is not positive.
  [[nodiscard]] acquire_awaiter acquire(clock::duration acquire_timeout = clock::duration::max(),
                                        clock::duration lease_timeout = clock::duration::max()) {
    if (lease_timeout <= clock::duration::zero())
      throw std::invalid_argument("weft: actor_lock::acquire: the lease must be positive; use "
                                  "clock::duration::max() for no lease");
    return acquire_awaiter(&actor_, acquire_timeout, lease_timeout);
  }

  // Runs fn() holding the lock; F returns task<R> or R. Throws lock_timeout,
  // lease_expired (see the header comment), or what fn throws.
  template <class F>
  task<detail::block_result_t<F>> with(F fn, lock_options opts = {}) {
    return detail::run_locked([this](clock::duration t) { return acquire(t); }, std::move(fn), opts);
  }

  bool locked() const noexcept { return actor_.locked(); }
  std::size_t waiters() const noexcept { return actor_.waiters(); }

 private:
  detail::lock_actor actor_;
};

}  // namespace weft
