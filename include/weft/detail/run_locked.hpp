// weft/detail/run_locked.hpp — the body of every with() (actor_lock and
// keyed_lock): acquire, run the block under its lease, release.
//
// A block that returns a task runs as a deadline_child
// (detail/deadline_child.hpp), which cancels it when the lease runs out; a
// plain function cannot be cancelled, so if it overran, its result is
// dropped once it returns. Either way lease_expired is thrown while the
// guard still holds the lock, after the block has ended, so two holders
// never overlap.
#pragma once

#include <functional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include <weft/detail/acquire_awaiter.hpp>
#include <weft/detail/deadline_child.hpp>
#include <weft/errors.hpp>
#include <weft/lock_guard.hpp>
#include <weft/task.hpp>
#include <weft/time.hpp>

namespace weft::detail {

// std::invalid_argument naming `who` when the options make no sense (a lease
// that is zero or negative would cancel every block before it starts).
void check_lock_options(const lock_options& opts, const char* who);

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

}  // namespace weft::detail
