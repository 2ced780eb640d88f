// lib/lock_keys.hpp — the key table of a keyed_lock: key -> lock actor.
//
// Owns every live key actor. An actor lives exactly while something refers
// to it: an acquire in progress or a guard (`refs`). ref() finds or creates
// the actor and counts the reference; unref() drops one and, at zero, removes
// and frees the actor. Both run under the key's shard mutex, so an arrival
// either finds the actor before its removal (and keeps it alive) or creates a
// new one after it: it is never queued on a removed actor.
//
// The table is 32 shards, each a chained hash table guarded by its own mutex;
// the critical section is a lookup or an unlink, never a wait for a lock.
// Memory follows the keys in use: an entry is one allocation (the key's bytes
// follow it), and a shard's bucket array doubles when its load passes 1 and
// halves when it falls under 1/4, down to min_buckets.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <vector>

#include <weft/lock_guard.hpp>

namespace weft::detail {

class key_table {
 public:
  // A power of two, so the shard is a few top bits of the hash; 32 keeps two
  // loops' worth of busy keys apart without a kilobyte-sized empty table.
  static constexpr std::size_t shard_bits = 5;
  static constexpr std::size_t shard_count = std::size_t{1} << shard_bits;
  // Smallest bucket array per shard: small enough that an idle table costs
  // about 2 KiB, big enough that a handful of keys per shard never rehashes.
  static constexpr std::size_t min_buckets = 8;

  key_table();
  ~key_table();  // debug builds assert no key is left
  key_table(const key_table&) = delete;
  key_table& operator=(const key_table&) = delete;

  // The actor for `key`, created if needed, with one more reference.
  // std::bad_alloc when a new key cannot be allocated.
  lock_actor* ref(std::string_view key);
  // lock_actor::unref of every key actor: drops one reference; the last one
  // removes the key.
  static void unref(lock_actor* a) noexcept;

  std::size_t size() const noexcept;          // live keys
  std::size_t bucket_count() const noexcept;  // all shards (for tests)

  // Which of `buckets` (a power of two) a hash falls in; the shard uses the
  // top bits, the bucket the low ones, so the two never correlate.
  static constexpr std::size_t shard_of(std::size_t hash) noexcept {
    return static_cast<std::size_t>(static_cast<std::uint64_t>(hash) >> (64 - shard_bits));
  }
  static constexpr std::size_t bucket_of(std::size_t hash, std::size_t buckets) noexcept {
    return hash & (buckets - 1);
  }

  struct entry;
  struct alignas(64) shard {  // its own cache line: keys in other shards never share it
    std::mutex mu;
    std::vector<entry*> buckets;
    std::size_t count = 0;
    // The highest fence any removed key of this shard reached: a re-created
    // key continues after it, so fences per key never repeat or go back.
    std::uint64_t fence_floor = 0;
    std::atomic<std::size_t> count_seen{0};  // count, for keys() without the mutex

    void rehash(std::size_t n);
  };

 private:
  shard shards_[shard_count];
};

}  // namespace weft::detail
