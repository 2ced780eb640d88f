// tests/core/test_sharded_registry.cpp — the sharded string registry behind
// keyed_lock and tenants (lib/core/sharded_registry.hpp): shard and bucket
// arithmetic at its boundaries, references counted per key with the last one
// removing the entry exactly once, hooks that throw adding nothing, the
// per-shard state kept across removals (R4), and plain threads taking and
// dropping references on one hot key and on many keys at once — run under
// ThreadSanitizer, an entry used after its removal or two entries for one key
// (R1, R2) shows up here.
#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/sharded_registry.hpp"
#include "support.hpp"

using weft::detail::no_shard_state;
using weft::detail::sharded_registry;

namespace {

// An entry that knows whether it is alive and counts how many entries its
// test holds at once.
struct probe {
  static constexpr int alive = 0x5eed, dead = -1;
  std::atomic<int> state{alive};
  std::atomic<long> uses{0};
  std::atomic<int>* live = nullptr;  // the test's count of entries alive now
  ~probe() {
    state = dead;
    if (live) live->fetch_sub(1);
  }
};

// Removals per shard, written by `forgetting` and read by `made`: only ever
// under the shard's mutex (R4), which TSan checks.
struct removals {
  long count = 0;
};

using probe_registry = sharded_registry<probe, removals>;

// Runs body(t) on `threads` plain threads and joins them; gives up (failing
// the test, not hanging it) if they do not all finish within the shared bound.
template <class Body>
void on_threads(int threads, Body body) {
  std::atomic<int> finished{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) ts.emplace_back([&, t] {
    body(t);
    ++finished;
  });
  test::wait_for([&] { return finished == threads; }, "the registry's threads to finish");
  for (auto& th : ts) th.join();
}

}  // namespace

TEST_SUITE("sharded_registry") {

TEST_CASE("the shard and the bucket of a hash come from opposite ends of it") {
  using reg = sharded_registry<probe>;
  CHECK(reg::shard_of(0) == 0);
  CHECK(reg::shard_of(~std::size_t{0}) == reg::shard_count - 1);
  CHECK(reg::shard_of(std::size_t{1} << 58) == 0);
  CHECK(reg::shard_of(std::size_t{1} << 59) == 1);
  CHECK(reg::bucket_of(~std::size_t{0}, 8) == 7);
  CHECK(reg::bucket_of(std::size_t{8}, 8) == 0);
  CHECK(reg::bucket_of(std::size_t{1} << 63, 1024) == 0);
}

TEST_CASE("a key's entry is made once, shared by every reference, and removed by the last one") {
  probe_registry reg;
  std::atomic<int> live{0};
  int made = 0;
  auto make = [&](probe& p, removals&) {
    ++made;
    p.live = &live;
    ++live;
  };
  probe* a = reg.ref("alpha", make);
  probe* again = reg.ref("alpha", make);
  probe* b = reg.ref("beta", make);
  CHECK(a == again);
  CHECK(a != b);
  CHECK(made == 2);
  CHECK(reg.size() == 2);
  CHECK(probe_registry::key_of(*a) == "alpha");
  CHECK_FALSE(probe_registry::unref(again));
  CHECK(reg.size() == 2);
  CHECK(reg.find("alpha", [](probe* p) { return p != nullptr; }));
  CHECK(probe_registry::unref(a));
  CHECK_FALSE(reg.find("alpha", [](probe* p) { return p != nullptr; }));
  CHECK(reg.size() == 1);
  CHECK(live == 1);
  CHECK(probe_registry::unref(b));
  CHECK(reg.size() == 0);
  CHECK(live == 0);
}

TEST_CASE("a made hook that throws adds nothing, and the key can be made later") {
  sharded_registry<probe> reg;
  auto refuse = [](probe&, no_shard_state&) { throw std::runtime_error("no entry"); };
  CHECK_THROWS_AS(reg.ref("k", refuse), std::runtime_error);
  CHECK(reg.size() == 0);
  CHECK_FALSE(reg.find("k", [](probe* p) { return p != nullptr; }));
  probe* p = reg.ref("k");
  CHECK(reg.size() == 1);
  CHECK(sharded_registry<probe>::unref(p));
}

TEST_CASE("the shard state outlives the entries: what forgetting leaves, the next made reads") {
  probe_registry reg;
  long seen = -1;
  for (int round = 0; round < 3; ++round) {
    probe* p = reg.ref("same key", [&](probe&, removals& r) { seen = r.count; });
    CHECK(seen == round);
    probe_registry::unref(p, [](probe&, removals& r) noexcept { ++r.count; });
  }
}

TEST_CASE("threads taking and dropping one key at once never see two entries for it nor a removed one") {
  probe_registry reg;
  std::atomic<int> live{0}, most{0};
  std::atomic<long> made{0}, forgotten{0}, misses{0};
  constexpr int threads = 4, rounds = 20'000;
  on_threads(threads, [&](int t) {
    std::mt19937 rng(static_cast<unsigned>(t) + 1);
    auto make = [&](probe& p, removals& r) {
      p.live = &live;
      ++live;
      ++made;
      // Entries of the key in the table: a plain field, under the shard's
      // mutex. (Not `live`: an unlinked entry is destroyed after the mutex
      // is let go, R3, so a new one may be made before the old one is gone.)
      const int now = static_cast<int>(++r.count);
      if (now > most.load()) most = now;
    };
    auto forgetting = [&](probe&, removals& r) noexcept {
      --r.count;
      ++forgotten;
    };
    for (int i = 0; i < rounds; ++i) {
      probe* p = reg.ref("hot", make);
      // Sometimes a second reference, dropped first, so that drops from
      // above 1 (no mutex) meet drops of the last (under it).
      probe* second = rng() % 4 == 0 ? reg.ref("hot", make) : nullptr;
      if (p->state != probe::alive || (second && second != p)) ++misses;
      ++p->uses;
      if (second) probe_registry::unref(second, forgetting);
      if (rng() % 8 == 0) std::this_thread::yield();
      probe_registry::unref(p, forgetting);
    }
  });
  CHECK(misses == 0);
  CHECK(most == 1);  // R1: one entry per key at a time
  CHECK(made == forgotten);
  CHECK(made >= 1);
  CHECK(live == 0);
  CHECK(reg.size() == 0);
}

TEST_CASE("threads taking and dropping many keys across the shards leave every entry removed exactly once") {
  probe_registry reg;
  std::atomic<int> live{0};
  std::atomic<long> made{0}, forgotten{0}, misses{0};
  constexpr int threads = 4, rounds = 20'000, keys = 256;
  on_threads(threads, [&](int t) {
    std::mt19937 rng(static_cast<unsigned>(t) + 100);
    auto make = [&](probe& p, removals&) {
      p.live = &live;
      ++live;
      ++made;
    };
    auto forgetting = [&](probe&, removals&) noexcept { ++forgotten; };
    std::vector<probe*> held;
    for (int i = 0; i < rounds; ++i) {
      // Hold up to 64 keys at a time, so shards grow and shrink while
      // other threads look up and remove.
      const std::string key = "key-" + std::to_string(rng() % keys);
      probe* p = reg.ref(key, make);
      if (p->state != probe::alive || probe_registry::key_of(*p) != key) ++misses;
      // Held by this thread, so it must be there.
      if (i % 1000 == 0 && !reg.find(key, [p](probe* q) { return q == p; })) ++misses;
      held.push_back(p);
      if (held.size() > 64 || rng() % 3 == 0) {
        const std::size_t which = rng() % held.size();
        probe_registry::unref(held[which], forgetting);
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(which));
      }
    }
    for (probe* p : held) probe_registry::unref(p, forgetting);
  });
  CHECK(misses == 0);
  CHECK(made == forgotten);
  CHECK(live == 0);
  CHECK(reg.size() == 0);
  CHECK(reg.bucket_count() == probe_registry::shard_count * probe_registry::min_buckets);
}

}  // TEST_SUITE
