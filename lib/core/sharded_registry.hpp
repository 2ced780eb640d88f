// lib/core/sharded_registry.hpp — a concurrent map from strings to entries that
// live exactly while something refers to them. keyed_lock's key table
// (lib/sync/lock_keys.hpp: key -> lock actor) and tenants' table
// (lib/tenants/coordinator_state.hpp: tenant -> coordinator) are both one of these.
//
// ref(key) finds the key's entry, or makes it, and counts one reference;
// unref(entry) drops one, and the unref that drops the last removes the entry
// and destroys it. So memory follows the keys in use, not the keys ever used.
//
// Layout:
//  * 32 shards (shard_bits = 5), each a mutex and a chained hash table, each
//    on its own cache line. The critical section is a lookup, an insertion
//    or an unlink, never a wait. With n threads at a registry at once (a
//    runtime's loops, a plain thread: two to four here), an operation finds
//    its shard taken about (n-1) times in 32. More shards would cost every
//    registry, idle or not, 128 bytes of shard and 64 of buckets each: 32
//    keep an idle registry at 6 KiB.
//  * One 64-bit std::hash of the key picks both the shard and the bucket:
//    the shard from its top shard_bits bits, the bucket (a power of two)
//    from its low bits. Taken from opposite ends, they never correlate:
//    had both come from the low bits, every key of shard s would have s in
//    its low five bits and use one bucket in 32 of its shard.
//  * An entry is one allocation: the registry's node header, the user's T
//    (the node derives from T, so unref takes the T* it handed out), then
//    the key's bytes. A shard's bucket array doubles when its load passes 1
//    and halves when it falls under 1/4, down to min_buckets.
//
// Ground rules (R1-R4; the code and tests/core/test_sharded_registry.cpp name them):
//  R1 An entry is in its shard's table exactly while its count of
//     references is above zero, and a key has at most one entry.
//  R2 The count rises only under the shard's mutex (ref). It may fall
//     without the mutex only from above 1; whoever may be dropping the last
//     reference takes the mutex first, and there, with no ref() able to
//     run, decides and unlinks. So an arrival either finds the entry before
//     its removal (and keeps it alive) or makes a new one after it: it
//     never lands on an entry being removed.
//  R3 An unlinked entry is destroyed after the mutex is let go: nobody can
//     reach it any more, and its destructor (which may do real work, as a
//     tenant's coordinator does) never runs inside the critical section.
//  R4 Each shard has a ShardState next to its table, touched only under its
//     mutex by the `made` and `forgetting` hooks: keyed_lock keeps there the
//     fence a removed key reached, so a re-made key continues after it.
#pragma once

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <new>
#include <string_view>
#include <utility>
#include <vector>

namespace weft::detail {

static_assert(sizeof(std::size_t) == 8, "sharded_registry takes the shard from the top bits of a 64-bit hash");

struct no_shard_state {};

template <class T, class ShardState = no_shard_state>
class sharded_registry {
 public:
  static constexpr unsigned shard_bits = 5;
  static constexpr std::size_t shard_count = std::size_t{1} << shard_bits;
  // Smallest bucket array per shard: small enough that an idle registry
  // costs 2 KiB of buckets, big enough that a handful of keys per shard
  // never rehashes.
  static constexpr std::size_t min_buckets = 8;

  static constexpr std::size_t shard_of(std::size_t hash) noexcept { return hash >> (64 - shard_bits); }
  static constexpr std::size_t bucket_of(std::size_t hash, std::size_t buckets) noexcept {
    return hash & (buckets - 1);
  }

  sharded_registry() {
    for (shard& s : shards_) s.buckets.assign(min_buckets, nullptr);
  }
  // Pre: every reference was dropped (debug builds assert it).
  ~sharded_registry() {
    for ([[maybe_unused]] shard& s : shards_) assert(s.count == 0 && "a registry entry outlived its registry");
  }
  sharded_registry(const sharded_registry&) = delete;
  sharded_registry& operator=(const sharded_registry&) = delete;

  // The entry for `key`, with one more reference. A new key's entry is
  // default-constructed, then made(entry, shard_state) runs, both under the
  // shard's mutex; if either throws (std::bad_alloc included), nothing is
  // added and the exception propagates. The key is copied.
  template <class Made>
  T* ref(std::string_view key, Made&& made) {
    const std::size_t h = std::hash<std::string_view>{}(key);
    shard& s = shards_[shard_of(h)];
    std::lock_guard<std::mutex> g(s.mu);
    for (node* n = s.buckets[bucket_of(h, s.buckets.size())]; n != nullptr; n = n->chain) {
      if (n->hash == h && n->key() == key) {
        // relaxed: R2, the count only has to be atomic against drops made
        // without the mutex; the RMW continues their release sequence.
        n->refs.fetch_add(1, std::memory_order_relaxed);
        return n;
      }
    }
    node* n = node::make(h, &s, key);
    try {
      made(static_cast<T&>(*n), s.state);
    } catch (...) {
      node::destroy(n);
      throw;
    }
    if (s.count + 1 > s.buckets.size()) {
      try {
        s.rehash(s.buckets.size() * 2);
      } catch (const std::bad_alloc&) {
        // Longer chains, still correct: better than refusing the key.
      }
    }
    node*& slot = s.buckets[bucket_of(h, s.buckets.size())];
    n->chain = slot;
    slot = n;
    s.set_count(s.count + 1);
    return n;
  }
  T* ref(std::string_view key) {
    return ref(key, [](T&, ShardState&) noexcept {});
  }

  // Drops one reference to `entry` (from ref). The last one removes it:
  // forgetting(entry, shard_state) runs under the shard's mutex as it is
  // unlinked, then the entry is destroyed after the mutex is let go (R3).
  // Returns whether this was the last reference; the registry itself is
  // not touched after the entry is destroyed.
  template <class Forgetting>
  static bool unref(T* entry, Forgetting&& forgetting) noexcept {
    node* n = static_cast<node*>(entry);
    // Not the last (R2): drop it without the mutex.
    std::size_t seen = n->refs.load(std::memory_order_relaxed);
    while (seen > 1) {
      // release: our use of the entry happens before whoever frees it
      // (their acquire below reads this RMW or a later one).
      if (n->refs.compare_exchange_weak(seen, seen - 1, std::memory_order_release, std::memory_order_relaxed))
        return false;
    }
    shard& s = *n->home;
    {
      std::lock_guard<std::mutex> g(s.mu);
      // Under the mutex nobody can add a reference (R2). A count of 1 is
      // ours alone, so no RMW is needed; above 1, other holders may be
      // dropping theirs without the mutex meanwhile, and the fetch_sub says
      // whether ours was the last after all.
      // acquire (both): every other holder's use of the entry, published by
      // its release drop, happens before the free below.
      if (n->refs.load(std::memory_order_acquire) != 1 && n->refs.fetch_sub(1, std::memory_order_acq_rel) != 1)
        return false;
      node** link = &s.buckets[bucket_of(n->hash, s.buckets.size())];
      while (*link != n) link = &(*link)->chain;
      *link = n->chain;
      s.set_count(s.count - 1);
      forgetting(static_cast<T&>(*n), s.state);
      if (s.buckets.size() > min_buckets && s.count < s.buckets.size() / 4) {
        try {
          s.rehash(s.buckets.size() / 2);
        } catch (const std::bad_alloc&) {
          // Keep the bigger array; it shrinks at a later removal.
        }
      }
    }
    node::destroy(n);
    return true;
  }
  static bool unref(T* entry) noexcept {
    return unref(entry, [](T&, ShardState&) noexcept {});
  }

  // f(entry or nullptr) under the key's shard mutex, without taking a
  // reference: the entry is only safe to use inside f.
  template <class F>
  decltype(auto) find(std::string_view key, F&& f) const {
    const std::size_t h = std::hash<std::string_view>{}(key);
    const shard& s = shards_[shard_of(h)];
    std::lock_guard<std::mutex> g(s.mu);
    T* found = nullptr;
    for (node* n = s.buckets[bucket_of(h, s.buckets.size())]; n != nullptr; n = n->chain) {
      if (n->hash == h && n->key() == key) {
        found = n;
        break;
      }
    }
    return std::forward<F>(f)(found);
  }

  // f(entry) for every entry, one shard at a time under its mutex.
  template <class F>
  void for_each(F&& f) {
    for (shard& s : shards_) {
      std::lock_guard<std::mutex> g(s.mu);
      for (node* head : s.buckets)
        for (node* n = head; n != nullptr; n = n->chain) f(static_cast<T&>(*n));
    }
  }

  static std::string_view key_of(const T& entry) noexcept { return static_cast<const node&>(entry).key(); }

  // Entries alive now: a snapshot, exact once every ref and unref has
  // happened before the call.
  std::size_t size() const noexcept {
    std::size_t n = 0;
    // relaxed: a snapshot, as size() promises no more.
    for (const shard& s : shards_) n += s.count_seen.load(std::memory_order_relaxed);
    return n;
  }
  std::size_t bucket_count() const {  // all shards' buckets (for tests)
    std::size_t n = 0;
    for (const shard& s : shards_) {
      std::lock_guard<std::mutex> g(s.mu);
      n += s.buckets.size();
    }
    return n;
  }

 private:
  struct shard;

  struct node final : T {
    node* chain = nullptr;  // next in its bucket (shard mutex)
    const std::size_t hash;
    // References: R1, R2. Starts at 1, for the ref() that makes the node.
    std::atomic<std::size_t> refs{1};
    shard* const home;
    const std::size_t key_size;

    node(std::size_t h, shard* s, std::string_view k) : hash(h), home(s), key_size(k.size()) {
      k.copy(bytes(), k.size());
    }
    char* bytes() noexcept { return reinterpret_cast<char*>(this + 1); }
    const char* bytes() const noexcept { return reinterpret_cast<const char*>(this + 1); }
    std::string_view key() const noexcept { return {bytes(), key_size}; }

    // One allocation: the node, then the key's bytes.
    static node* make(std::size_t h, shard* s, std::string_view k) {
      void* p = ::operator new(sizeof(node) + k.size());
      try {
        return ::new (p) node(h, s, k);
      } catch (...) {
        ::operator delete(p);
        throw;
      }
    }
    static void destroy(node* n) noexcept {
      n->~node();
      ::operator delete(n);
    }
  };

  struct alignas(64) shard {  // its own cache line: keys in other shards never share it
    mutable std::mutex mu;
    std::vector<node*> buckets;  // mu
    std::size_t count = 0;       // mu
    [[no_unique_address]] ShardState state;  // mu (R4)
    std::atomic<std::size_t> count_seen{0};  // count, for size() without the mutex

    void set_count(std::size_t n) noexcept {
      count = n;
      // relaxed: a snapshot for size(); the mutex orders everything else.
      count_seen.store(n, std::memory_order_relaxed);
    }
    void rehash(std::size_t n) {
      std::vector<node*> fresh(n, nullptr);  // may throw: the table is unchanged then
      for (node* head : buckets) {
        while (head != nullptr) {
          node* next = head->chain;
          node*& slot = fresh[bucket_of(head->hash, n)];
          head->chain = slot;
          slot = head;
          head = next;
        }
      }
      buckets.swap(fresh);
    }
  };

  shard shards_[shard_count];
};

}  // namespace weft::detail
