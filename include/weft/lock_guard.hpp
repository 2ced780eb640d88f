// weft/lock_guard.hpp — lock_options, and lock_guard: what every weft lock
// (actor_lock, keyed_lock) hands out with a grant.
//
// Releasing hands the lock straight to the next waiter, in FIFO order. The
// lock behind a guard is a mailbox actor (detail/lock_actor.hpp): a release
// nobody waits for is one CAS, anything else is a message to it.
#pragma once

#include <chrono>
#include <cstdint>
#include <utility>

#include <weft/detail/lock_actor.hpp>
#include <weft/time.hpp>

namespace weft {

struct lock_options {
  // How long acquire waits for the grant before throwing lock_timeout.
  clock::duration acquire_timeout = std::chrono::seconds(3);
  // How long a with() block may hold the lock before it is cancelled and
  // with() throws lease_expired. clock::duration::max(): no lease limit.
  clock::duration lease_timeout = std::chrono::seconds(3);
};

// Ownership of one grant of a lock. Move-only; releases on destruction or
// unlock(), without co_await, from any thread (it may be moved into another
// task on another loop). Releasing twice is harmless.
class lock_guard {
 public:
  lock_guard() noexcept = default;  // owns nothing
  // A moved guard may leave the task that took it (returned, handed to
  // another task), so the lock forgets its owning task: asking again from
  // there is no longer caught as re-entrant, and a task that reuses the
  // first one's memory is never taken for it.
  // A lease goes with the owner: a moved guard has no lease left.
  lock_guard(lock_guard&& o) noexcept : actor_(std::exchange(o.actor_, nullptr)), fence_(o.fence_) {
    forget_owner();
  }
  lock_guard& operator=(lock_guard&& o) noexcept {
    if (this != &o) {
      unlock();
      actor_ = std::exchange(o.actor_, nullptr);
      fence_ = o.fence_;
      forget_owner();
    }
    return *this;
  }
  lock_guard(const lock_guard&) = delete;
  lock_guard& operator=(const lock_guard&) = delete;
  ~lock_guard() { unlock(); }

  // The fencing token of this grant: strictly increasing with every grant of
  // the lock (of the key, for keyed_lock), so a resource that remembers the
  // highest fence it has seen can refuse a stale holder. Kept after unlock().
  std::uint64_t fence() const noexcept { return fence_; }

  // Releases the lock (the next waiter is granted); a no-op once released.
  void unlock() noexcept {
    if (detail::lock_actor* a = std::exchange(actor_, nullptr)) {
      a->forget_owner();
      a->release();
      if (a->unref) a->unref(a);
    }
  }

  bool owns_lock() const noexcept { return actor_ != nullptr; }
  explicit operator bool() const noexcept { return owns_lock(); }

 private:
  friend struct detail::lock_access;
  lock_guard(detail::lock_actor* a, std::uint64_t fence) noexcept : actor_(a), fence_(fence) {}
  void forget_owner() noexcept {
    if (actor_) actor_->forget_owner();
  }

  detail::lock_actor* actor_ = nullptr;
  std::uint64_t fence_ = 0;
};

}  // namespace weft
