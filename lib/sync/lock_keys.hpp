// lib/sync/lock_keys.hpp — the key table of a keyed_lock: key -> lock actor, a
// sharded_registry (lib/core/sharded_registry.hpp) of lock actors.
//
// Owns every live key actor. An actor lives exactly while something refers
// to it: an acquire in progress or a guard. ref() finds or makes the actor
// and counts the reference; unref() drops one and, at the last, removes and
// frees the actor. The registry decides the last reference under the key's
// shard mutex, where every arrival finds or makes its actor, so an arrival is
// never queued on a removed actor.
//
// Fences never repeat or go back per key: each shard remembers the highest
// fence any of its removed keys reached (the registry's per-shard state,
// under its mutex), and a re-made key continues after it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <weft/lock_guard.hpp>

#include "core/sharded_registry.hpp"

namespace weft::detail {

class key_table {
 public:
  key_table() = default;
  ~key_table();  // debug builds assert no key is left
  key_table(const key_table&) = delete;
  key_table& operator=(const key_table&) = delete;

  // The actor for `key`, made if needed, with one more reference.
  // std::bad_alloc when a new key cannot be allocated.
  lock_actor* ref(std::string_view key);
  // lock_actor::unref of every key actor: drops one reference; the last one
  // removes the key.
  static void unref(lock_actor* a) noexcept;

  std::size_t size() const noexcept { return keys_.size(); }  // live keys
  std::size_t bucket_count() const { return keys_.bucket_count(); }  // all shards (for tests)

  struct key_actor : lock_actor {
    key_actor() noexcept { unref = &key_table::unref; }
  };
  // The highest fence any removed key of the shard reached.
  struct fence_floor {
    std::uint64_t fence = 0;
  };
  using registry = sharded_registry<key_actor, fence_floor>;

 private:
  registry keys_;
};

}  // namespace weft::detail
