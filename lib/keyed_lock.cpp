// lib/keyed_lock.cpp — keyed_lock and its key table (lib/lock_keys.hpp).
//
// A key's actor is created by the first ref() and freed by the unref() that
// drops its count to zero, both under the shard mutex. Every party that can
// be draining an actor's mailbox holds a reference while it does (an asker
// from its acquire's construction to its end, a releaser until release()
// has returned, a withdrawing waiter until it has resumed), so the count
// reaches zero only after the last drain, and the mutex orders that drain
// before the free.
#include <cassert>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>

#include <weft/keyed_lock.hpp>

#include "lock_keys.hpp"

namespace weft {

namespace detail {

static_assert(sizeof(std::size_t) == 8, "key_table::shard_of takes the top bits of a 64-bit hash");

struct key_table::entry final : lock_actor {
  entry* chain = nullptr;  // next in its bucket (shard mutex)
  std::size_t hash;
  std::size_t refs = 0;    // shard mutex
  shard* home;
  std::size_t key_size;

  entry(std::size_t h, shard* s, std::string_view key) noexcept : hash(h), home(s), key_size(key.size()) {
    unref = &key_table::unref;
    key.copy(bytes(), key.size());
  }
  char* bytes() noexcept { return reinterpret_cast<char*>(this + 1); }
  std::string_view key() noexcept { return {bytes(), key_size}; }

  // One allocation: the entry, then the key's bytes.
  static entry* make(std::size_t h, shard* s, std::string_view key) {
    void* p = ::operator new(sizeof(entry) + key.size());
    return ::new (p) entry(h, s, key);
  }
  static void destroy(entry* e) noexcept {
    e->~entry();
    ::operator delete(e);
  }
};

void key_table::shard::rehash(std::size_t n) {
  std::vector<entry*> fresh(n, nullptr);  // may throw: the table is unchanged then
  for (entry* head : buckets) {
    while (head != nullptr) {
      entry* next = head->chain;
      entry*& slot = fresh[bucket_of(head->hash, n)];
      head->chain = slot;
      slot = head;
      head = next;
    }
  }
  buckets.swap(fresh);
}

key_table::key_table() {
  for (shard& s : shards_) s.buckets.assign(min_buckets, nullptr);
}

key_table::~key_table() {
  for ([[maybe_unused]] shard& s : shards_)
    assert(s.count == 0 && "a keyed_lock was destroyed while a key was held or waited for");
}

lock_actor* key_table::ref(std::string_view key) {
  const std::size_t h = std::hash<std::string_view>{}(key);
  shard& s = shards_[shard_of(h)];
  std::lock_guard<std::mutex> g(s.mu);
  for (entry* e = s.buckets[bucket_of(h, s.buckets.size())]; e != nullptr; e = e->chain) {
    if (e->hash == h && e->key() == key) {
      ++e->refs;
      return e;
    }
  }
  entry* e = entry::make(h, &s, key);
  e->continue_fences_after(s.fence_floor);
  e->refs = 1;
  if (s.count + 1 > s.buckets.size()) {
    try {
      s.rehash(s.buckets.size() * 2);
    } catch (const std::bad_alloc&) {
      // Longer chains, still correct: better than refusing the key.
    }
  }
  entry*& slot = s.buckets[bucket_of(h, s.buckets.size())];
  e->chain = slot;
  slot = e;
  ++s.count;
  // relaxed: a snapshot for keys(); the mutex orders everything else.
  s.count_seen.store(s.count, std::memory_order_relaxed);
  return e;
}

void key_table::unref(lock_actor* a) noexcept {
  auto* e = static_cast<entry*>(a);
  shard& s = *e->home;
  {
    std::lock_guard<std::mutex> g(s.mu);
    assert(e->refs > 0);
    if (--e->refs != 0) return;
    entry** link = &s.buckets[bucket_of(e->hash, s.buckets.size())];
    while (*link != e) link = &(*link)->chain;
    *link = e->chain;
    --s.count;
    if (e->last_fence() > s.fence_floor) s.fence_floor = e->last_fence();
    if (s.buckets.size() > min_buckets && s.count < s.buckets.size() / 4) {
      try {
        s.rehash(s.buckets.size() / 2);
      } catch (const std::bad_alloc&) {
        // Keep the bigger array; it shrinks at a later removal.
      }
    }
    // relaxed: a snapshot for keys(); the mutex orders everything else.
    s.count_seen.store(s.count, std::memory_order_relaxed);
  }
  entry::destroy(e);  // outside the mutex: nobody can reach it any more
}

std::size_t key_table::size() const noexcept {
  std::size_t n = 0;
  // relaxed: a snapshot, as keys() promises no more.
  for (const shard& s : shards_) n += s.count_seen.load(std::memory_order_relaxed);
  return n;
}

std::size_t key_table::bucket_count() const noexcept {
  std::size_t n = 0;
  for (const shard& s : shards_) {
    std::lock_guard<std::mutex> g(const_cast<shard&>(s).mu);
    n += s.buckets.size();
  }
  return n;
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
