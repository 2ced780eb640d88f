// tests/sync/test_keyed_lock.cpp — keyed_lock: keys are independent, each key is
// FIFO with fences that keep increasing across its removal and re-creation,
// idle keys are removed at once (also under a storm of arrivals on the same
// key), failed acquires drop their key, and the key table (lib/sync/lock_keys.hpp)
// gives its memory back.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <weft/keyed_lock.hpp>
#include <weft/weft.hpp>

#include "sync/lock_keys.hpp"
#include "never.hpp"

#include "support.hpp"

using namespace weft;
using test::eventually;
using test::exclusive;
using test::generous;
using test::loops;
using test::until;
using namespace std::chrono_literals;

TEST_CASE("a held key does not delay another key") {
  runtime rt(loops(2));
  keyed_lock keys;
  never::parked = 0;
  auto holder = rt.spawn([](keyed_lock& k) -> task<void> {
    lock_guard g = co_await k.acquire("a", generous);
    co_await never{};
  }(keys));
  REQUIRE(eventually([&] { return never::parked == 1; }));
  CHECK(keys.keys() == 1);
  const bool got_b = rt.block_on([](keyed_lock& k) -> task<bool> {
    lock_guard g = co_await k.acquire("b", 0s);  // would time out at once if "a" were in its way
    co_return g.owns_lock() && k.keys() == 2;
  }(keys));
  CHECK(got_b);
  CHECK(keys.keys() == 1);
  holder.cancel();
  CHECK_THROWS_AS(holder.join_blocking(), cancelled);
  CHECK(keys.keys() == 0);
}

TEST_CASE("an idle key is removed at once and keys() counts only keys held or waited for") {
  runtime rt(loops(1));
  keyed_lock keys;
  rt.block_on([](keyed_lock& k) -> task<void> {
    CHECK(k.keys() == 0);
    {
      lock_guard a = co_await k.acquire("a");
      lock_guard b = co_await k.acquire("b");
      CHECK(k.keys() == 2);
      a.unlock();
      CHECK(k.keys() == 1);
    }
    CHECK(k.keys() == 0);
    int v = co_await k.with("c", [&k]() -> task<int> {
      CHECK(k.keys() == 1);
      co_await yield();
      co_return 3;
    });
    CHECK(v == 3);
    CHECK(k.keys() == 0);
  }(keys));
}

TEST_CASE("fences of a key keep increasing after the key was removed and created again") {
  runtime rt(loops(1));
  keyed_lock keys;
  rt.block_on([](keyed_lock& k) -> task<void> {
    std::uint64_t last = 0;
    for (int i = 0; i < 5; ++i) {
      {
        lock_guard g = co_await k.acquire("k");
        CHECK(g.fence() > last);
        last = g.fence();
        lock_guard other = co_await k.acquire("other-" + std::to_string(i));  // same table, other keys
      }
      CHECK(k.keys() == 0);  // removed: the next acquire creates it anew
    }
  }(keys));
}

TEST_CASE("each key grants its waiters in the order they asked") {
  runtime rt(loops(1));
  keyed_lock keys;
  std::vector<int> order;
  int asked = 0;
  rt.block_on([](keyed_lock& k, std::vector<int>& o, int& a) -> task<void> {
    lock_guard g = co_await k.acquire("q");
    std::vector<join_handle<void>> hs;
    for (int i = 0; i < 50; ++i) {
      hs.push_back(spawn([](keyed_lock& k2, std::vector<int>& o2, int& a2, int me) -> task<void> {
        ++a2;  // one loop: it runs on into the ask and parks there
        co_await k2.with("q", [&o2, me]() -> task<void> {
          o2.push_back(me);
          co_await yield();
        });
      }(k, o, a, i)));
    }
    CHECK(co_await until([&] { return a == 50; }));
    g.unlock();
    for (auto& h : hs) co_await h;
  }(keys, order, asked));
  REQUIRE(order.size() == 50);
  for (int i = 0; i < 50; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
  CHECK(keys.keys() == 0);
}

TEST_CASE("a storm of arrivals on one key as it goes idle never lands on a removed actor") {
  runtime rt(loops(2));
  keyed_lock keys;
  exclusive ex;
  std::uint64_t counter = 0;               // guarded by the key
  std::vector<std::uint64_t> fences;       // guarded by the key
  rt.block_on([](keyed_lock& k, exclusive& e, std::uint64_t& c, std::vector<std::uint64_t>& f) -> task<void> {
    std::vector<join_handle<void>> hs;
    for (int t = 0; t < 64; ++t) {
      hs.push_back(spawn([](keyed_lock& k2, exclusive& e2, std::uint64_t& c2, std::vector<std::uint64_t>& f2,
                            int me) -> task<void> {
        for (int round = 0; round < 200; ++round) {
          {
            lock_guard g = co_await k2.acquire("hot", generous);
            e2.enter();
            f2.push_back(g.fence());
            const std::uint64_t seen = c2;
            if ((round + me) % 3 == 0) co_await yield();
            c2 = seen + 1;
            e2.leave();
          }
          // Let the key go idle often, so removal and arrival keep meeting.
          if ((round + me) % 2 == 0) co_await yield();
        }
      }(k, e, c, f, t)));
    }
    for (auto& h : hs) co_await h;
  }(keys, ex, counter, fences));
  CHECK(counter == 64 * 200);
  CHECK_FALSE(ex.overlapped);
  bool increasing = true;
  for (std::size_t i = 1; i < fences.size(); ++i) increasing = increasing && fences[i] > fences[i - 1];
  CHECK(increasing);
  CHECK(keys.keys() == 0);
}

TEST_CASE("an acquire that times out or is cancelled drops its key") {
  runtime rt(loops(2));
  keyed_lock keys;
  rt.block_on([](keyed_lock& k) -> task<void> {
    lock_guard g = co_await k.acquire("x");
    // Another task: this one asking again would be refused as re-entrant.
    auto late = spawn([](keyed_lock& k2) -> task<bool> {
      try {
        lock_guard l = co_await k2.acquire("x", 5ms);
      } catch (const lock_timeout&) {
        co_return true;
      }
      co_return false;
    }(k));
    CHECK(co_await late);
    auto w = spawn([](keyed_lock& k2) -> task<void> {
      lock_guard mine = co_await k2.acquire("y", generous);  // "y" exists only while this waits
      co_await never{};
    }(k));
    CHECK(co_await until([&] { return k.keys() == 2; }));
    w.cancel();
    CHECK(co_await test::ends_cancelled(w));
    CHECK(k.keys() == 1);
  }(keys));
  CHECK(keys.keys() == 0);
}

TEST_CASE("with copies the key, so a temporary key may die before the task runs") {
  runtime rt(loops(1));
  keyed_lock keys(lock_options{1s, 1s});
  rt.block_on([](keyed_lock& k) -> task<void> {
    auto t = k.with(std::string("a key long enough to live on the heap, not in the string"), [&k] {
      return k.keys();
    });
    std::size_t seen = co_await t;
    CHECK(seen == 1);
  }(keys));
  CHECK(keys.keys() == 0);
}

TEST_CASE("a keyed_lock refuses a lease that is not positive") {
  CHECK_THROWS_AS(keyed_lock(lock_options{1s, 0s}), std::invalid_argument);
  CHECK_THROWS_AS(keyed_lock(lock_options{1s, -5s}), std::invalid_argument);
}

TEST_CASE("the key table's buckets grow with the keys in use and shrink back when they go") {
  detail::key_table table;
  const std::size_t idle_buckets = table.bucket_count();
  CHECK(idle_buckets == detail::key_table::registry::shard_count * detail::key_table::registry::min_buckets);
  std::vector<detail::lock_actor*> refs;
  for (int i = 0; i < 20'000; ++i) refs.push_back(table.ref("key-" + std::to_string(i)));
  CHECK(table.size() == 20'000);
  CHECK(table.bucket_count() >= 20'000);
  CHECK(table.ref("key-7") == refs[7]);  // same key, same actor
  detail::key_table::unref(refs[7]);
  for (auto* a : refs) detail::key_table::unref(a);
  CHECK(table.size() == 0);
  CHECK(table.bucket_count() == idle_buckets);
}

TEST_CASE("100,000 distinct keys used once each leave no key behind") {
  runtime rt(loops(2));
  keyed_lock keys;
  rt.block_on([](keyed_lock& k) -> task<void> {
    std::vector<join_handle<void>> hs;
    for (int w = 0; w < 8; ++w) {
      hs.push_back(spawn([](keyed_lock& k2, int worker) -> task<void> {
        for (int i = worker; i < 100'000; i += 8) {
          lock_guard g = co_await k2.acquire("user:" + std::to_string(i), generous);
        }
      }(k, w)));
    }
    for (auto& h : hs) co_await h;
  }(keys));
  CHECK(keys.keys() == 0);
}

TEST_CASE("shutting the runtime down with keys held and waited for leaves no key behind") {
  keyed_lock keys;  // outlives the runtime
  {
    runtime rt(loops(2));
    for (int i = 0; i < 20; ++i) {
      rt.spawn([](keyed_lock& k, int me) -> task<void> {
        lock_guard g = co_await k.acquire("k" + std::to_string(me % 4), generous);
        co_await never{};
      }(keys, i));
    }
    REQUIRE(eventually([&] { return keys.keys() == 4; }));
  }
  CHECK(keys.keys() == 0);
}
