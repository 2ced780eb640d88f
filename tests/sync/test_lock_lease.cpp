// tests/sync/test_lock_lease.cpp — an actor_lock's lease: the time a holder may
// keep the lock. A lease that runs out stops the holder (a with() block, or
// the task holding an acquire() guard, wherever it is parked) and passes the
// lock on only once it is gone, and with() then throws lease_expired; a
// guard released or moved before its lease ends leaves its task alone; a
// lease must be positive, and the longest ones neither overflow nor expire.
// Time is real here: lower bounds exact, upper bounds only "did not hang".
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include <weft/actor_lock.hpp>
#include <weft/weft.hpp>

#include "never.hpp"
#include "stop_probe.hpp"
#include "support.hpp"

using namespace weft;
using test::eventually;
using test::generous;
using test::loops;
using test::until;
using namespace std::chrono_literals;

TEST_CASE("a lease that runs out stops the block, passes the lock on only after it is gone, and with throws lease_expired") {
  runtime rt(loops(2));
  actor_lock lock;
  std::atomic<bool> unwound{false};
  std::atomic<bool> next_saw_unwound{false};
  std::atomic<bool> block_cancelled{false};
  struct slow_unwind {
    std::atomic<bool>& done;
    ~slow_unwind() {
      std::this_thread::sleep_for(5ms);  // a slow unwind: nobody may take the lock meanwhile
      done = true;
    }
  };
  rt.block_on([](actor_lock& l, std::atomic<bool>& uw, std::atomic<bool>& seen, std::atomic<bool>& bc) -> task<void> {
    const auto start = clock::now();
    auto holder = spawn(l.with(
        [&uw, &bc]() -> task<void> {
          slow_unwind guard{uw};
          struct stop_mark {
            std::atomic<bool>& b;
            ~stop_mark() { b = true; }  // the frame goes: the block stopped
          } mark{bc};
          co_await never{};
        },
        lock_options{generous, 20ms}));
    CHECK(co_await until([&] { return l.locked(); }));
    auto next = spawn([](actor_lock& l2, std::atomic<bool>& uw2, std::atomic<bool>& seen2) -> task<void> {
      lock_guard g = co_await l2.acquire(generous);
      seen2 = uw2.load();
    }(l, uw, seen));
    bool expired = false;
    try {
      co_await holder;
    } catch (const lease_expired& e) {
      expired = true;
      CHECK(uw.load());  // thrown after the unwind
      CHECK(std::string(e.what()).find("20 ms") != std::string::npos);
    }
    CHECK(expired);
    CHECK(clock::now() - start >= 20ms);
    co_await next;
  }(lock, unwound, next_saw_unwound, block_cancelled));
  CHECK(block_cancelled);
  CHECK(next_saw_unwound);
  CHECK_FALSE(lock.locked());
}

TEST_CASE("a lease of duration::max() or of centuries neither overflows nor expires") {
  runtime rt(loops(1));
  actor_lock lock;
  rt.block_on([](actor_lock& l) -> task<void> {
    for (clock::duration lease : {clock::duration::max(), clock::duration::max() - 1ns,
                                  std::chrono::duration_cast<clock::duration>(std::chrono::hours(24 * 365 * 250))}) {
      int v = co_await l.with(
          []() -> task<int> {
            co_await sleep_for(1ms);
            co_return 7;
          },
          lock_options{clock::duration::max(), lease});
      CHECK(v == 7);
    }
    bool rejected = false;
    try {
      co_await l.with([] { return 0; }, lock_options{1s, 0s});
    } catch (const std::invalid_argument& e) {
      rejected = std::string(e.what()).find("lease_timeout") != std::string::npos;
    }
    CHECK(rejected);
    CHECK_FALSE(l.locked());
  }(lock));
}

TEST_CASE("a plain-function block that overran its lease makes with throw lease_expired") {
  runtime rt(loops(1));
  actor_lock lock;
  rt.block_on([](actor_lock& l) -> task<void> {
    bool expired = false;
    try {
      co_await l.with([] { std::this_thread::sleep_for(5ms); }, lock_options{1s, 1ms});
    } catch (const lease_expired&) {
      expired = true;
    }
    CHECK(expired);
    CHECK_FALSE(l.locked());
  }(lock));
}

TEST_CASE("a lease on an acquire() guard stops its holder parked in a sleep, and the lock moves on") {
  runtime rt(loops(2));
  actor_lock lock;
  std::atomic<bool> holding{false}, cleaned_up{false};
  auto holder = [](actor_lock& l, std::atomic<bool>& h, std::atomic<bool>& c) -> task<int> {
    lock_guard g = co_await l.acquire(5s, 50ms);
    test::at_exit cleanup{[&c] { c = true; }};
    h = true;
    co_await sleep_for(1h);  // overruns its lease
    co_return 1;
  };
  auto h = rt.spawn(holder(lock, holding, cleaned_up));
  REQUIRE(eventually([&] { return holding.load(); }));
  auto next = rt.spawn([](actor_lock& l) -> task<bool> {
    lock_guard g = co_await l.acquire(generous);
    co_return g.owns_lock();
  }(lock));
  CHECK(test::finishes_cancelled(h));  // stopped: its guard released as the frame went
  CHECK(cleaned_up);
  CHECK(next.join_blocking());
  CHECK_FALSE(lock.locked());
}

TEST_CASE("a lease on an acquire() guard stops its holder parked on another lock; it leaves that queue") {
  runtime rt(loops(2));
  actor_lock a, b;
  std::atomic<bool> b_taken{false}, release_b{false};
  auto b_holder = rt.spawn([](actor_lock& l, std::atomic<bool>& taken, std::atomic<bool>& let_go) -> task<void> {
    lock_guard g = co_await l.acquire();
    taken = true;
    co_await until([&] { return let_go.load(); });
  }(b, b_taken, release_b));
  REQUIRE(eventually([&] { return b_taken.load(); }));
  auto holder = rt.spawn([](actor_lock& first, actor_lock& second) -> task<void> {
    lock_guard g = co_await first.acquire(5s, 50ms);
    lock_guard h = co_await second.acquire();  // waits for ever: b is held
  }(a, b));
  REQUIRE(eventually([&] { return b.waiters() == 1; }));
  CHECK(test::finishes_cancelled(holder));
  CHECK(b.waiters() == 0);  // left b's queue as it stopped
  CHECK_FALSE(a.locked());  // and released a
  release_b = true;
  b_holder.join_blocking();
}

TEST_CASE("a guard released before its lease ends leaves its task alone, and a moved guard has no lease") {
  runtime rt(loops(2));
  actor_lock lock;
  auto early = [](actor_lock& l) -> task<int> {
    {
      lock_guard g = co_await l.acquire(5s, 20ms);
    }
    co_await sleep_for(60ms);  // past the lease, without the lock
    lock_guard g = co_await l.acquire(5s, 20ms);
    lock_guard moved = std::move(g);  // the lease ended with the move
    co_await sleep_for(60ms);
    co_return 7;
  };
  CHECK(rt.block_on(early(lock)) == 7);
  CHECK_FALSE(lock.locked());
}

TEST_CASE("acquire refuses a lease that is not positive") {
  actor_lock lock;
  CHECK_THROWS_AS((void)lock.acquire(1s, 0s), std::invalid_argument);
  CHECK_THROWS_AS((void)lock.acquire(1s, -1s), std::invalid_argument);
}
