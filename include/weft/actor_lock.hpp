// weft/actor_lock.hpp — actor_lock: an async, FIFO, fencing lock with acquire
// and lease timeouts.
//
// This lock grants strictly FIFO: waiters are granted in the order they asked,
// directly (a newcomer never barges past a waiter), and each on its own loop.
// It never blocks a thread: acquire suspends the task. The machinery (a
// mailbox actor, no mutex) is described in detail/lock_actor.hpp.
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

#include <cstddef>
#include <stdexcept>
#include <utility>

#include <weft/detail/acquire_awaiter.hpp>
#include <weft/detail/lock_actor.hpp>
#include <weft/detail/run_locked.hpp>
#include <weft/errors.hpp>
#include <weft/lock_guard.hpp>
#include <weft/task.hpp>
#include <weft/time.hpp>

namespace weft {

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
