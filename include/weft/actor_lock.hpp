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
// leaves the queue at once and is never granted; if the grant got there first
// the acquire succeeds instead (exactly one of them wins). with() runs its
// block holding the lock; when the lease runs out the block is cancelled, the
// lock passes on only after the block has unwound (two holders never
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
#include <weft/detail/rooted_context.hpp>
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
  acquire_awaiter(lock_actor* a, clock::duration timeout) noexcept : actor_(a), timeout_(timeout) {
    on_cancel = [](cancel_hook* h) noexcept { static_cast<acquire_awaiter*>(h)->withdraw(cancelled); };
    fire = [](timer_node* t) noexcept { static_cast<acquire_awaiter*>(t)->withdraw(timed_out); };
  }
  acquire_awaiter(const acquire_awaiter&) = delete;
  acquire_awaiter& operator=(const acquire_awaiter&) = delete;
  ~acquire_awaiter() = default;

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
    if (is_cancelled(ctx)) {
      refused_ = true;
      return false;
    }
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
    if (granted_inline) return lock_access::adopt(actor_, fence);
    if (refused_) weft::detail::throw_cancelled();
    if (armed()) disarm_timer(this);  // granted before the deadline
    // acquire: pairs with the claim CAS of whoever ended the wait (the wake
    // already orders it; this keeps the read self-evidently safe).
    switch (claim.load(std::memory_order_acquire)) {
      case granted:  // by a drain on another party's stack, which woke us
        return lock_access::adopt(actor_, fence);
      case timed_out:
        throw lock_timeout("weft: the lock was not granted within its acquire timeout of " +
                           describe_duration(timeout_) +
                           "; this waiter has left the queue. Retry, raise the acquire timeout, or "
                           "hold the lock for less time");
      default:
        weft::detail::throw_cancelled();
    }
  }

 protected:
  lock_actor* actor_;

 private:
  // The cancel hook or the timer (home loop) tries to end the wait.
  void withdraw(std::uint8_t why) noexcept {
    std::uint8_t expected = pending;
    // acq_rel: one winner between this and the grant on another thread; the
    // loser must not touch what the winner goes on to do.
    if (!claim.compare_exchange_strong(expected, why, std::memory_order_acq_rel, std::memory_order_relaxed))
      return;  // granted first: the grant's wake resumes us with the lock
    if (armed()) disarm_timer(this);  // cancelled before the deadline
    actor_->withdraw(this);  // the actor wakes us once we are out of its queue
  }

  clock::duration timeout_;
  bool refused_ = false;  // cancelled before asking
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

// Runs a with() block as a child context on the holder's loop, with the
// lease as its deadline. At the deadline the block is cancelled; the parent
// resumes only once the block has finished and nothing is in flight to it,
// so the lock is released after the block has unwound. The child, its timer
// and the parent share one loop (start_local), so they need no atomics.
template <class T>
struct lease_awaiter : timer_node, cancel_hook {
  struct block_context final : rooted_context<T> {
    lease_awaiter* owner;
    block_context(task<T>&& t, lease_awaiter* o) noexcept : rooted_context<T>(std::move(t)), owner(o) {
      this->quiesced = [](task_context* c) noexcept { static_cast<block_context*>(c)->owner->block_done(); };
    }
  };
  block_context block;
  task_context* parent = nullptr;
  clock::time_point until;
  clock::duration lease;
  bool expired = false;
  bool refused = false;

  // Pre: t holds a coroutine; until != time_point::max().
  lease_awaiter(task<T>&& t, clock::time_point u, clock::duration l) noexcept
      : block(std::move(t), this), until(u), lease(l) {
    on_cancel = [](cancel_hook* h) noexcept {
      // The holder itself was cancelled: so is its block, which we await.
      request_cancel(&static_cast<lease_awaiter*>(h)->block);
    };
    fire = [](timer_node* n) noexcept {
      auto* self = static_cast<lease_awaiter*>(n);
      self->expired = true;
      request_cancel(&self->block);
    };
  }
  void block_done() noexcept {
    if (armed()) disarm_timer(this);  // finished first: the timer goes at once
    wake(parent);
  }

  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h) {
    parent = current_context();
    if (is_cancelled(parent)) {
      refused = true;
      return false;
    }
    parent->resume_point = h;
    parent->hook = this;
    arm_timer(this, until);
    start_local(&block);
    return true;
  }
  decltype(auto) await_resume() {
    if (refused) weft::detail::throw_cancelled();
    if (expired && !is_cancelled(parent))
      throw lease_expired("weft: the lock holder overran its lease of " + describe_duration(lease) +
                          "; its block was cancelled and has unwound, and the lock moved on. Raise "
                          "lock_options::lease_timeout, or do less while holding the lock");
    return block.result.take();
  }
};

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
    lease_awaiter<R> lease(std::move(block), until, opts.lease_timeout);
    co_return co_await lease;
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
  // lock only if nobody holds it or waits), cancelled when the task is
  // cancelled while waiting.
  [[nodiscard]] acquire_awaiter acquire(clock::duration acquire_timeout = clock::duration::max()) noexcept {
    return acquire_awaiter(&actor_, acquire_timeout);
  }

  // Runs fn() holding the lock; F returns task<R> or R. Throws lock_timeout,
  // lease_expired (see the header comment), cancelled, or what fn throws.
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
