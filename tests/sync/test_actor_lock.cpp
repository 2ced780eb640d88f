// tests/sync/test_actor_lock.cpp — actor_lock: mutual exclusion, strict FIFO and
// direct hand-off, fences, withdrawal on cancel and timeout (and their races
// with the grant), with() and guards, a 100,000-waiter chain in constant
// stack, and shutdown with the lock in use. Leases are in test_lock_lease.cpp.
// Time is real here: lower bounds exact, upper bounds only "did not hang".
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <weft/actor_lock.hpp>
#include <weft/weft.hpp>

#include "counted.hpp"
#include "never.hpp"
#include "support.hpp"

using namespace weft;
using test::eventually;
using test::exclusive;
using test::generous;
using test::loops;
using test::until;
using namespace std::chrono_literals;

namespace {


task<lock_guard> take(actor_lock& l) { co_return co_await l.acquire(); }

// acquire() with a ticket drawn under a mutex in the same critical section
// that posts the ask, so ticket order is the order the asks reached the lock.
struct ticketed_acquire {
  actor_lock::acquire_awaiter inner;
  std::mutex& mu;
  std::uint64_t& next_ticket;
  std::uint64_t ticket = 0;

  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h) {
    std::lock_guard<std::mutex> g(mu);
    ticket = next_ticket++;
    return inner.await_suspend(h);
  }
  std::pair<lock_guard, std::uint64_t> await_resume() { return {inner.await_resume(), ticket}; }
};

}  // namespace

TEST_CASE("only one task holds the lock at a time: 1,000 tasks on 2 loops yielding while they hold it") {
  runtime rt(loops(2));
  actor_lock lock;
  exclusive ex;
  std::uint64_t counter = 0;  // guarded by the lock: read before the yield, written after
  rt.block_on([](actor_lock& l, exclusive& e, std::uint64_t& c) -> task<void> {
    std::vector<join_handle<void>> hs;
    for (int t = 0; t < 1000; ++t) {
      hs.push_back(spawn([](actor_lock& l2, exclusive& e2, std::uint64_t& c2) -> task<void> {
        for (int round = 0; round < 20; ++round) {
          lock_guard g = co_await l2.acquire();
          e2.enter();
          const std::uint64_t seen = c2;
          co_await yield();
          c2 = seen + 1;
          e2.leave();
        }
      }(l, e, c)));
    }
    for (auto& h : hs) co_await h;
  }(lock, ex, counter));
  CHECK(counter == 1000 * 20);
  CHECK_FALSE(ex.overlapped);
  CHECK_FALSE(lock.locked());
  CHECK(lock.waiters() == 0);
}

TEST_CASE("a task that holds the lock asking for it again gets std::logic_error, not a deadlock") {
  runtime rt(test::loops(2));
  actor_lock lock;
  keyed_lock keys;
  auto twice = [](actor_lock& l) -> task<std::string> {
    auto g = co_await l.acquire(std::chrono::seconds(5));
    try {
      auto again = co_await l.acquire(std::chrono::seconds(5));
      co_return "granted twice";
    } catch (const std::logic_error& e) {
      co_return e.what();
    }
  };
  const std::string said = rt.block_on(twice(lock));
  CHECK_MESSAGE(said.find("not re-entrant") != std::string::npos, said);
  CHECK_FALSE(lock.locked());  // the first guard went with the task
  // Another task, and the same task after letting go, take it as usual.
  auto after = [](actor_lock& l) -> task<bool> {
    {
      auto g = co_await l.acquire(std::chrono::seconds(5));
    }
    auto g = co_await l.acquire(std::chrono::seconds(5));
    co_return g.owns_lock();
  };
  CHECK(rt.block_on(after(lock)));
  // The same for one key of a keyed_lock; another key is a different lock.
  auto keyed = [](keyed_lock& k) -> task<std::string> {
    auto a = co_await k.acquire("a", std::chrono::seconds(5));
    auto b = co_await k.acquire("b", std::chrono::seconds(5));
    try {
      auto again = co_await k.acquire("a", std::chrono::seconds(5));
      co_return "granted twice";
    } catch (const std::logic_error& e) {
      co_return e.what();
    }
  };
  const std::string keyed_said = rt.block_on(keyed(keys));
  CHECK_MESSAGE(keyed_said.find("not re-entrant") != std::string::npos, keyed_said);
  CHECK(eventually([&] { return keys.keys() == 0; }));
}

TEST_CASE("an uncontended acquire is granted without suspending and locked() reports the holder") {
  runtime rt(loops(1));
  actor_lock lock;
  rt.block_on([](actor_lock& l) -> task<void> {
    CHECK_FALSE(l.locked());
    {
      lock_guard g = co_await l.acquire();
      CHECK(g.owns_lock());
      CHECK(l.locked());
      CHECK(l.waiters() == 0);
    }
    CHECK_FALSE(l.locked());
    lock_guard again = co_await l.acquire(0s);  // a zero timeout takes a free lock
    CHECK(again.owns_lock());
  }(lock));
}

TEST_CASE("waiters on one loop are granted in the order they asked") {
  runtime rt(loops(1));
  actor_lock lock;
  std::vector<int> order;
  rt.block_on([](actor_lock& l, std::vector<int>& o) -> task<void> {
    lock_guard g = co_await l.acquire();
    std::vector<join_handle<void>> hs;
    for (int i = 0; i < 200; ++i) {
      hs.push_back(spawn([](actor_lock& l2, std::vector<int>& o2, int me) -> task<void> {
        lock_guard mine = co_await l2.acquire();
        o2.push_back(me);
        co_await yield();  // hold across a suspension: the next must still wait its turn
      }(l, o, i)));
    }
    CHECK(co_await until([&] { return l.waiters() == 200; }));
    g.unlock();
    for (auto& h : hs) co_await h;
  }(lock, order));
  REQUIRE(order.size() == 200);
  for (int i = 0; i < 200; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
}

TEST_CASE("waiters on two loops are granted in the order their asks reached the lock") {
  runtime rt(loops(2));
  actor_lock lock;
  std::mutex mu;
  std::uint64_t next_ticket = 0;
  std::vector<std::uint64_t> granted;  // guarded by the lock
  rt.block_on([](actor_lock& l, std::mutex& m, std::uint64_t& nt, std::vector<std::uint64_t>& gr) -> task<void> {
    std::vector<join_handle<void>> hs;
    for (int t = 0; t < 500; ++t) {
      hs.push_back(spawn([](actor_lock& l2, std::mutex& m2, std::uint64_t& nt2,
                            std::vector<std::uint64_t>& gr2) -> task<void> {
        for (int round = 0; round < 4; ++round) {
          ticketed_acquire ask{l2.acquire(), m2, nt2};  // named: see lock_waiter on aggregate temporaries
          auto [g, ticket] = co_await ask;
          gr2.push_back(ticket);
          co_await yield();
        }
      }(l, m, nt, gr)));
    }
    for (auto& h : hs) co_await h;
  }(lock, mu, next_ticket, granted));
  REQUIRE(granted.size() == 2000);
  bool in_order = true;
  for (std::size_t i = 0; i < granted.size(); ++i) in_order = in_order && granted[i] == i;
  CHECK(in_order);
}

TEST_CASE("a newcomer asking right after a release queues behind the waiter it was handed to") {
  runtime rt(loops(1));
  actor_lock lock;
  std::vector<std::string> order;
  rt.block_on([](actor_lock& l, std::vector<std::string>& o) -> task<void> {
    lock_guard g = co_await l.acquire();
    auto w = spawn([](actor_lock& l2, std::vector<std::string>& o2) -> task<void> {
      lock_guard mine = co_await l2.acquire();
      o2.push_back("waiter");
    }(l, o));
    CHECK(co_await until([&] { return l.waiters() == 1; }));
    g.unlock();  // handed to the waiter, which has not run yet
    CHECK(l.locked());
    lock_guard again = co_await l.acquire();  // must not barge
    o.push_back("newcomer");
    co_await w;
  }(lock, order));
  CHECK(order == std::vector<std::string>{"waiter", "newcomer"});
}

TEST_CASE("every grant carries a fence greater than every earlier grant's") {
  runtime rt(loops(2));
  actor_lock lock;
  std::vector<std::uint64_t> fences;  // guarded by the lock
  rt.block_on([](actor_lock& l, std::vector<std::uint64_t>& f) -> task<void> {
    std::vector<join_handle<void>> hs;
    for (int t = 0; t < 100; ++t) {
      hs.push_back(spawn([](actor_lock& l2, std::vector<std::uint64_t>& f2) -> task<void> {
        for (int round = 0; round < 10; ++round) {
          lock_guard g = co_await l2.acquire();
          f2.push_back(g.fence());
          co_await yield();
        }
      }(l, f)));
    }
    for (auto& h : hs) co_await h;
    int n = co_await l.with([&f]() { return static_cast<int>(f.size()); });
    CHECK(n == 1000);
  }(lock, fences));
  REQUIRE(fences.size() == 1000);
  CHECK(fences.front() >= 1);
  bool increasing = true;
  for (std::size_t i = 1; i < fences.size(); ++i) increasing = increasing && fences[i] > fences[i - 1];
  CHECK(increasing);
}

TEST_CASE("a cancelled waiter leaves the queue at once, is never granted, and those behind it are served in order") {
  runtime rt(loops(2));
  actor_lock lock;
  std::vector<int> order;  // guarded by the lock
  rt.block_on([](actor_lock& l, std::vector<int>& o) -> task<void> {
    lock_guard g = co_await l.acquire();
    auto waiter = [](actor_lock& l2, std::vector<int>& o2, int me) -> task<void> {
      lock_guard mine = co_await l2.acquire();
      o2.push_back(me);
    };
    auto w0 = spawn(waiter(l, o, 0));
    CHECK(co_await until([&] { return l.waiters() == 1; }));
    auto w1 = spawn(waiter(l, o, 1));
    CHECK(co_await until([&] { return l.waiters() == 2; }));
    auto w2 = spawn(waiter(l, o, 2));
    CHECK(co_await until([&] { return l.waiters() == 3; }));
    w1.cancel();
    CHECK(co_await test::ends_cancelled(w1));
    CHECK(l.waiters() == 2);  // gone before its await ended
    g.unlock();
    co_await w0;
    co_await w2;
  }(lock, order));
  CHECK(order == std::vector<int>{0, 2});
  CHECK_FALSE(lock.locked());
}

TEST_CASE("cancel racing the grant, 2,000 times: the waiter gets the lock or stops, never both, and the lock moves on") {
  runtime rt(loops(2));
  actor_lock lock;
  exclusive ex;
  int granted = 0, withdrawn = 0;
  for (int round = 0; round < 2000; ++round) {
    lock_guard held = rt.block_on(take(lock));  // this plain thread holds the lock
    std::atomic<int> outcome{0};                // 1 granted, 2 stopped
    auto racer = rt.spawn([](actor_lock& l, exclusive& e, std::atomic<int>& out) -> task<void> {
      // Stopped while waiting, the frame goes without the body going on:
      // only this destructor sees it.
      struct stop_mark {
        std::atomic<int>& o;
        ~stop_mark() {
          if (o == 0) o = 2;
        }
      } mark{out};
      lock_guard g = co_await l.acquire();
      e.enter();
      out = 1;
      e.leave();
    }(lock, ex, outcome));
    REQUIRE(eventually([&] { return lock.waiters() == 1; }));
    // A second waiter behind it: it must be served whoever wins the race.
    auto behind = rt.spawn([](actor_lock& l, exclusive& e) -> task<void> {
      lock_guard g = co_await l.acquire();
      e.enter();
      co_await yield();
      e.leave();
    }(lock, ex));
    REQUIRE(eventually([&] { return lock.waiters() == 2; }));
    if (round % 2 == 0) {
      held.unlock();
      racer.cancel();
    } else {
      racer.cancel();
      held.unlock();
    }
    try {
      racer.join_blocking();
    } catch (const cancelled&) {
    }
    behind.join_blocking();
    if (outcome == 1) ++granted;
    else if (outcome == 2) ++withdrawn;
    CHECK_FALSE(lock.locked());
    CHECK(lock.waiters() == 0);
  }
  CHECK(granted + withdrawn == 2000);
  // Both ends of the race really happened (the rounds alternate the order).
  CHECK(granted > 0);
  CHECK(withdrawn > 0);
  CHECK_FALSE(ex.overlapped);
  MESSAGE("granted " << granted << ", withdrawn " << withdrawn);
}

// The mailbox under every kind of poster at once: asks from two loops, releases
// from two plain threads, cancellations from a third. Meant for TSan.
TEST_CASE("asks on two loops, releases on plain threads and cancels at once keep the lock exclusive and free of lost unlocks") {
  runtime rt(loops(2));
  actor_lock lock;
  exclusive ex;
  std::mutex mu;
  std::vector<lock_guard> handed;  // guards waiting for a releaser thread
  std::atomic<bool> producing{true};
  std::atomic<int> grants{0}, released{0};

  std::vector<std::thread> releasers;
  for (int r = 0; r < 2; ++r) {
    releasers.emplace_back([&] {
      for (;;) {
        lock_guard g;
        {
          std::lock_guard<std::mutex> l(mu);
          if (!handed.empty()) {
            g = std::move(handed.back());
            handed.pop_back();
          }
        }
        if (g) {
          ex.leave();
          g.unlock();
          ++released;
        } else if (!producing) {
          return;
        } else {
          std::this_thread::yield();
        }
      }
    });
  }
  std::vector<join_handle<void>> hs;
  for (int t = 0; t < 200; ++t) {
    hs.push_back(rt.spawn([](actor_lock& l, exclusive& e, std::mutex& m, std::vector<lock_guard>& out,
                             std::atomic<int>& gr) -> task<void> {
      for (int round = 0; round < 50; ++round) {
        lock_guard g = co_await l.acquire();
        e.enter();
        ++gr;
        std::lock_guard<std::mutex> lk(m);
        out.push_back(std::move(g));
      }
    }(lock, ex, mu, handed, grants)));
  }
  for (std::size_t t = 0; t < hs.size(); t += 3) hs[t].cancel();
  int finished = 0, cancelled_ = 0;
  for (auto& h : hs) {
    try {
      h.join_blocking();
      ++finished;
    } catch (const cancelled&) {
      ++cancelled_;
    }
  }
  producing = false;
  for (auto& th : releasers) th.join();
  CHECK(finished + cancelled_ == 200);
  CHECK(released == grants);
  CHECK_FALSE(ex.overlapped);
  CHECK_FALSE(lock.locked());
  CHECK(lock.waiters() == 0);
}

TEST_CASE("an acquire that times out throws lock_timeout, leaves the queue, and later waiters are still served in order") {
  runtime rt(loops(2));
  actor_lock lock;
  std::vector<int> order;  // guarded by the lock
  rt.block_on([](actor_lock& l, std::vector<int>& o) -> task<void> {
    lock_guard g = co_await l.acquire();
    auto waiter = [](actor_lock& l2, std::vector<int>& o2, int me, clock::duration t) -> task<void> {
      lock_guard mine = co_await l2.acquire(t);
      o2.push_back(me);
    };
    auto w0 = spawn(waiter(l, o, 0, clock::duration::max()));
    CHECK(co_await until([&] { return l.waiters() == 1; }));
    const auto asked = clock::now();
    auto w1 = spawn(waiter(l, o, 1, 20ms));
    CHECK(co_await until([&] { return l.waiters() == 2; }));
    auto w2 = spawn(waiter(l, o, 2, 10s));
    CHECK(co_await until([&] { return l.waiters() == 3; }));
    bool timed_out = false;
    try {
      co_await w1;
    } catch (const lock_timeout& e) {
      timed_out = true;
      CHECK(std::string(e.what()).find("20 ms") != std::string::npos);
    }
    CHECK(timed_out);
    CHECK(clock::now() - asked >= 20ms);  // never early
    CHECK(l.waiters() == 2);
    g.unlock();
    co_await w0;
    co_await w2;
  }(lock, order));
  CHECK(order == std::vector<int>{0, 2});
}

TEST_CASE("a waiter granted before its acquire timeout leaves no timer armed") {
  runtime rt(loops(1));
  actor_lock lock;
  rt.block_on([](actor_lock& l, runtime& r) -> task<void> {
    lock_guard g = co_await l.acquire();
    auto w = spawn([](actor_lock& l2) -> task<std::uint64_t> {
      lock_guard mine = co_await l2.acquire(std::chrono::hours(1));
      co_return mine.fence();
    }(l));
    CHECK(co_await until([&] { return l.waiters() == 1; }));
    CHECK(r.stats().timers == 1);
    g.unlock();
    CHECK(co_await w == g.fence() + 1);
    CHECK(r.stats().timers == 0);
  }(lock, rt));
}

namespace {
// A bare coroutine type that is not a weft task, run eagerly on the caller's thread.
struct foreign {
  struct promise_type {
    foreign get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept {}
  };
};
foreign acquire_outside_a_task(actor_lock& l, std::string& error) {
  try {
    lock_guard g = co_await l.acquire();
  } catch (const std::logic_error& e) {
    error = e.what();
  }
}
}  // namespace

TEST_CASE("acquire awaited outside a weft task throws logic_error saying where to run it") {
  actor_lock lock;
  std::string error;
  acquire_outside_a_task(lock, error);
  CHECK(error.find("outside a weft task") != std::string::npos);
  CHECK_FALSE(lock.locked());
}

TEST_CASE("a zero acquire timeout takes a free lock and gives up at once on a held one") {
  runtime rt(loops(1));
  actor_lock lock;
  rt.block_on([](actor_lock& l) -> task<void> {
    lock_guard g = co_await l.acquire(0s);
    // Another task asks (this one asking again would be refused as re-entrant).
    auto second = spawn([](actor_lock& l2) -> task<bool> {
      try {
        lock_guard s = co_await l2.acquire(0s);
      } catch (const lock_timeout&) {
        co_return true;
      }
      co_return false;
    }(l));
    CHECK(co_await second);
    CHECK(l.waiters() == 0);
    CHECK(g.owns_lock());
  }(lock));
}

TEST_CASE("acquire timeout racing the grant, 1,000 times: exactly one wins, no lost unlock, no double grant") {
  runtime rt(loops(2, 50us));
  actor_lock lock;
  exclusive ex;
  int granted = 0, timed_out = 0;
  rt.block_on([](actor_lock& l, exclusive& e, int& gr, int& to) -> task<void> {
    for (int round = 0; round < 1000; ++round) {
      lock_guard g = co_await l.acquire();
      const auto t = std::chrono::microseconds(50 * (round % 4));
      auto racer = spawn([](actor_lock& l2, exclusive& e2, clock::duration tt) -> task<int> {
        try {
          lock_guard mine = co_await l2.acquire(tt);
          e2.enter();
          co_await yield();
          e2.leave();
          co_return 1;
        } catch (const lock_timeout&) {
          co_return 2;
        }
      }(l, e, t));
      switch (round % 3) {
        case 0: break;
        case 1: co_await yield(); break;
        default: co_await sleep_for(std::chrono::microseconds(50 * (round % 5))); break;
      }
      g.unlock();
      const int outcome = co_await racer;
      (outcome == 1 ? gr : to) += 1;
      // No lost unlock: the lock is free again and a fresh acquire gets it.
      lock_guard after = co_await l.acquire(generous);
      CHECK(after.fence() > g.fence());
    }
  }(lock, ex, granted, timed_out));
  CHECK(granted + timed_out == 1000);
  CHECK_FALSE(ex.overlapped);
  CHECK_FALSE(lock.locked());
  CHECK(lock.waiters() == 0);
  MESSAGE("granted " << granted << ", timed out " << timed_out);
}

TEST_CASE("with runs a task or a plain function holding the lock and yields its value") {
  runtime rt(loops(2));
  actor_lock lock;
  rt.block_on([](actor_lock& l) -> task<void> {
    int a = co_await l.with([&l]() -> task<int> {
      CHECK(l.locked());
      co_await yield();
      co_return 41;
    });
    CHECK(a == 41);
    std::string b = co_await l.with([&l] {
      CHECK(l.locked());
      return std::string("plain");
    });
    CHECK(b == "plain");
    co_await l.with([]() -> task<void> { co_return; });
    CHECK_FALSE(l.locked());
    // Exceptions from the block come out of with(), and the lock is released.
    bool threw = false;
    try {
      co_await l.with([]() -> task<int> {
        throw std::runtime_error("block failed");
        co_return 0;
      });
    } catch (const std::runtime_error& e) {
      threw = std::string(e.what()) == "block failed";
    }
    CHECK(threw);
    CHECK_FALSE(l.locked());
  }(lock));
}

TEST_CASE("with keeps the callable alive until the task it returned has finished") {
  runtime rt(loops(2));
  actor_lock lock;
  counted::reset();
  rt.block_on([](actor_lock& l) -> task<void> {
    auto t = l.with([c = counted{}]() -> task<int> {
      co_await yield();
      co_await sleep_for(1ms);
      co_return c.id;  // reads the capture after suspensions
    });
    int id = co_await t;
    CHECK(id > 0);
  }(lock));
  CHECK(counted::alive() == 0);
}

TEST_CASE("a guard releases once: unlock, a second unlock and destruction after it are harmless") {
  runtime rt(loops(1));
  actor_lock lock;
  rt.block_on([](actor_lock& l) -> task<void> {
    lock_guard g = co_await l.acquire();
    const auto f = g.fence();
    g.unlock();
    CHECK_FALSE(l.locked());
    g.unlock();
    CHECK_FALSE(l.locked());
    CHECK(g.fence() == f);  // the grant's fence stays readable
    lock_guard other = co_await l.acquire();
    g.unlock();  // must not release `other`'s grant
    CHECK(l.locked());
    lock_guard moved = std::move(other);
    CHECK_FALSE(other.owns_lock());
    other.unlock();
    CHECK(l.locked());
  }(lock));
  CHECK_FALSE(lock.locked());
}

TEST_CASE("a guard moved into a task on another loop releases from there and the next waiter is granted") {
  runtime rt(loops(2));
  actor_lock lock;
  rt.block_on([](actor_lock& l) -> task<void> {
    lock_guard g = co_await l.acquire();
    const std::uint64_t first = g.fence();
    auto next = spawn([](actor_lock& l2) -> task<std::uint64_t> {
      lock_guard mine = co_await l2.acquire(generous);
      co_return mine.fence();
    }(l));
    CHECK(co_await until([&] { return l.waiters() == 1; }));
    auto releaser = spawn([](lock_guard held) -> task<void> {
      co_await yield();
      held.unlock();
    }(std::move(g)));
    CHECK_FALSE(g.owns_lock());
    co_await releaser;
    CHECK(co_await next == first + 1);
  }(lock));
  CHECK_FALSE(lock.locked());
}

TEST_CASE("a chain of 100,000 waiters on one loop, each releasing to the next, runs in constant stack") {
  runtime rt(loops(1));
  actor_lock lock;
  struct depth {
    std::uintptr_t lo = UINTPTR_MAX, hi = 0;
    std::size_t granted = 0;
  } d;
  rt.block_on([](actor_lock& l, depth& dd) -> task<void> {
    constexpr int n = 100'000;
    lock_guard g = co_await l.acquire();
    std::vector<join_handle<void>> hs;
    hs.reserve(n);
    for (int i = 0; i < n; ++i) {
      hs.push_back(spawn([](actor_lock& l2, depth& d2) -> task<void> {
        lock_guard mine = co_await l2.acquire();
        const auto here = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
        d2.lo = std::min(d2.lo, here);
        d2.hi = std::max(d2.hi, here);
        ++d2.granted;
      }(l, dd)));
    }
    CHECK(co_await until([&] { return l.waiters() == n; }));
    g.unlock();
    for (auto& h : hs) co_await h;
  }(lock, d));
  CHECK(d.granted == 100'000);
  CHECK(d.hi - d.lo < 16 * 1024);  // every waiter resumed from the loop, none nested
}

TEST_CASE("shutting the runtime down with a holder, waiters and a leased block leaves the lock free and empty") {
  actor_lock lock;  // outlives the runtime, as a lock shared with its tasks must
  actor_lock leased;
  {
    runtime rt(loops(2));
    never::parked = 0;
    rt.spawn([](actor_lock& l) -> task<void> {
      lock_guard g = co_await l.acquire();
      co_await never{};
    }(lock));
    REQUIRE(eventually([&] { return lock.locked(); }));
    for (int i = 0; i < 10; ++i) {
      rt.spawn([](actor_lock& l) -> task<void> {
        lock_guard g = co_await l.acquire(generous);
        co_await never{};
      }(lock));
    }
    rt.spawn(leased.with([]() -> task<void> { co_await never{}; }, lock_options{generous, generous}));
    REQUIRE(eventually([&] { return lock.waiters() == 10 && leased.locked(); }));
  }  // ~runtime: cancels every task and waits for them
  CHECK_FALSE(lock.locked());
  CHECK(lock.waiters() == 0);
  CHECK_FALSE(leased.locked());
}

TEST_CASE("default lock options: 3 s to acquire and a 3 s lease, as the seed") {
  const lock_options o;
  CHECK(o.acquire_timeout == std::chrono::seconds(3));
  CHECK(o.lease_timeout == std::chrono::seconds(3));
  keyed_lock keys;
  CHECK(keys.defaults().acquire_timeout == std::chrono::seconds(3));
  CHECK(keys.defaults().lease_timeout == std::chrono::seconds(3));
}
