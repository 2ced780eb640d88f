// weft/detail/keyed_acquire_awaiter.hpp — keyed_acquire_awaiter: what
// keyed_lock::acquire returns. An actor_lock acquire on the key's actor that
// also owns one reference to that actor (lib/sync/lock_keys.hpp): the reference
// passes to the guard it yields, or is dropped when the acquire fails, so a
// key is forgotten as soon as nobody holds or waits for it.
#pragma once

#include <weft/actor_lock.hpp>
#include <weft/lock_guard.hpp>
#include <weft/time.hpp>

namespace weft::detail {

// acquire() for one key: holds a reference to the key's actor from its
// construction until the guard it yields takes it over, or until it is
// destroyed after a failed acquire.
class keyed_acquire_awaiter : public acquire_awaiter {
 public:
  keyed_acquire_awaiter(lock_actor* referenced, clock::duration timeout) noexcept
      : acquire_awaiter(referenced, timeout) {}
  ~keyed_acquire_awaiter() {
    if (handed_over_) return;  // the guard holds the reference now
    give_back_unadopted_grant();
    actor_->unref(actor_);
  }
  lock_guard await_resume() {
    lock_guard g = acquire_awaiter::await_resume();
    handed_over_ = true;
    return g;
  }

 private:
  bool handed_over_ = false;
};

}  // namespace weft::detail
