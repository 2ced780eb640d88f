// weft/keyed_lock.hpp — keyed_lock: one actor_lock per key, created on first
// use and removed as soon as nobody holds or waits for it.
//
// Each key is granted strictly FIFO with its own fencing tokens, exactly as
// an actor_lock (see actor_lock.hpp); different keys never wait on each
// other beyond a short critical section in the key table. Idle keys cost
// nothing: memory follows the keys in use, not the keys ever used.
//
//   weft::keyed_lock accounts;   // defaults: acquire timeout 3 s, lease 3 s
//   co_await accounts.with(id, [&]() -> weft::task<> { co_await debit(id, 10); });
//   auto g = co_await accounts.acquire(id, 500ms);   // or throws lock_timeout
//
// Removal never races an arrival: a key's actor counts the waiters and
// guards that refer to it. The count rises only under its table shard's
// mutex, and the last one going is decided, and the actor removed, under
// that same mutex, where every arrival finds or creates its actor: an
// arrival can never queue on a removed one.
// Fences stay strictly increasing per key across removal and re-creation.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <weft/actor_lock.hpp>
#include <weft/detail/keyed_acquire_awaiter.hpp>
#include <weft/lock_guard.hpp>
#include <weft/task.hpp>
#include <weft/time.hpp>

namespace weft {

namespace detail {
class key_table;  // lib/sync/lock_keys.hpp
}  // namespace detail

class keyed_lock {
 public:
  using acquire_awaiter = detail::keyed_acquire_awaiter;

  explicit keyed_lock(lock_options defaults = {});
  // Pre: no key is held or waited for (debug builds assert it).
  ~keyed_lock();
  keyed_lock(const keyed_lock&) = delete;
  keyed_lock& operator=(const keyed_lock&) = delete;

  // co_await keys.acquire(key, t) -> lock_guard for that key; lock_timeout
  // after t (clock::duration::max(): no limit); a cancelled waiter stops.
  // The key is copied; it need not outlive the call.
  [[nodiscard]] acquire_awaiter acquire(std::string_view key, clock::duration acquire_timeout);
  // As above, with the acquire timeout of the defaults.
  [[nodiscard]] acquire_awaiter acquire(std::string_view key) { return acquire(key, defaults_.acquire_timeout); }

  // Runs fn() holding the key's lock, as actor_lock::with. The key is copied.
  template <class F>
  task<detail::block_result_t<F>> with(std::string_view key, F fn) {
    return with(key, std::move(fn), defaults_);
  }
  template <class F>
  task<detail::block_result_t<F>> with(std::string_view key, F fn, lock_options opts) {
    return detail::run_locked([this, k = std::string(key)](clock::duration t) { return acquire(k, t); },
                              std::move(fn), opts);
  }

  // Keys that have a holder or a waiter (an acquire in progress counts).
  std::size_t keys() const noexcept;

  const lock_options& defaults() const noexcept { return defaults_; }

 private:
  lock_options defaults_;
  std::unique_ptr<detail::key_table> table_;
};

}  // namespace weft
