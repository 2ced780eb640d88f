// lib/sync/keyed_lock.cpp — keyed_lock and its key table (lib/sync/lock_keys.hpp).
//
// A key's actor is made by the first ref() and freed by the unref() that
// drops the last reference (lib/core/sharded_registry.hpp, R1-R3). Every party
// that can be draining an actor's mailbox holds a reference while it does (an
// asker from its acquire's construction to its end, a releaser until
// release() has returned, a withdrawing waiter until it has resumed), so the
// last reference goes only after the last drain, and the registry orders that
// drop before the free.
#include <algorithm>
#include <cassert>
#include <memory>

#include <weft/keyed_lock.hpp>

#include "sync/lock_keys.hpp"

namespace weft {

namespace detail {

key_table::~key_table() {
  assert(keys_.size() == 0 && "a keyed_lock was destroyed while a key was held or waited for");
}

lock_actor* key_table::ref(std::string_view key) {
  // Both hooks run under the shard's mutex (R4), which orders the floor.
  return keys_.ref(key, [](key_actor& fresh, fence_floor& floor) noexcept {
    fresh.continue_fences_after(floor.fence);
  });
}

void key_table::unref(lock_actor* a) noexcept {
  registry::unref(static_cast<key_actor*>(a), [](key_actor& idle, fence_floor& floor) noexcept {
    floor.fence = std::max(floor.fence, idle.last_fence());
  });
}

}  // namespace detail

keyed_lock::keyed_lock(lock_options defaults) : defaults_(defaults), table_(std::make_unique<detail::key_table>()) {
  detail::check_lock_options(defaults_, "keyed_lock");
}

keyed_lock::~keyed_lock() = default;

keyed_lock::acquire_awaiter keyed_lock::acquire(std::string_view key, clock::duration acquire_timeout) {
  return acquire_awaiter(table_->ref(key), acquire_timeout);
}

std::size_t keyed_lock::keys() const noexcept { return table_->size(); }

}  // namespace weft
