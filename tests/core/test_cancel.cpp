// tests/core/test_cancel.cpp — cancellation as a completion: a cancelled task
// stops at its suspension point (frames destroyed innermost first, no catch
// block sees it), promptly when parked, never lost when it lands before the
// next suspension point, racing completion without double or missing wakes;
// outcome(), shielded(), and what on_error hears.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <memory>
#include <stdexcept>
#include <vector>

#include <weft/weft.hpp>

#include "counted.hpp"
#include "never.hpp"
#include "stop_probe.hpp"
#include "support.hpp"

using namespace weft;
using test::eventually;
using test::finishes_cancelled;
using test::generous;
using test::loops;
using namespace std::chrono_literals;

TEST_CASE("cancelling a task parked where nothing else would resume it stops it") {
  runtime rt(loops(2));
  never::parked = 0;
  auto h = rt.spawn([]() -> task<void> { co_await never{}; }());
  test::wait_for([] { return never::parked > 0; }, "the task to park");
  h.cancel();
  CHECK(finishes_cancelled(h));
}

TEST_CASE("cancelling a task that keeps yielding stops it at a yield") {
  runtime rt(loops(1));
  std::atomic<int> rounds{0};
  auto h = rt.spawn([](std::atomic<int>& r) -> task<void> {
    for (;;) {
      ++r;
      co_await yield();
    }
  }(rounds));
  test::wait_for([&] { return rounds >= 100; }, "100 rounds of yield");
  h.cancel();
  CHECK(finishes_cancelled(h));
}

TEST_CASE("cancelling a task suspended on a join stops it, and the joined task keeps running") {
  runtime rt(loops(2));
  never::parked = 0;
  std::atomic<bool> joiner_cancelled{false};
  auto inner = rt.spawn([]() -> task<void> { co_await never{}; }());
  auto outer = rt.spawn([](join_handle<void>& in, std::atomic<bool>& jc) -> task<void> {
    test::stop_mark stopped{jc};
    co_await in;
    stopped.pass();
  }(inner, joiner_cancelled));
  test::wait_for([] { return never::parked > 0; }, "the task to park");
  std::this_thread::sleep_for(5ms);  // let outer park on the join (either order is valid)
  outer.cancel();
  CHECK(finishes_cancelled(outer));
  CHECK(joiner_cancelled);
  CHECK_FALSE(inner.done());
  inner.cancel();
  CHECK(finishes_cancelled(inner));
}

TEST_CASE("a cancel that lands before the next suspension point is not lost") {
  runtime rt(loops(2));
  std::atomic<bool> computing{false}, go_on{false};
  auto h = rt.spawn([](std::atomic<bool>& c, std::atomic<bool>& g) -> task<int> {
    c = true;
    while (!g) {
    }  // compute, no suspension point
    CHECK(this_task::is_cancelled());
    co_await never{};  // must stop at once instead of parking
    co_return 1;
  }(computing, go_on));
  test::wait_for([&] { return computing.load(); }, "the task to start computing");
  h.cancel();
  go_on = true;
  CHECK(finishes_cancelled(h));
}

TEST_CASE("a task cancelled before it starts never runs") {
  runtime rt(loops(1));
  std::atomic<bool> ran{false};
  rt.block_on([](std::atomic<bool>& r) -> task<void> {
    auto h = spawn([](std::atomic<bool>& rr) -> task<void> {
      rr = true;
      co_return;
    }(r));
    h.cancel();  // still queued: this loop is busy running us
    try {
      co_await h;
    } catch (const cancelled&) {
    }
  }(ran));
  CHECK_FALSE(ran);
}

TEST_CASE("is_cancelled is false off a loop thread and in a task nobody cancelled") {
  CHECK_FALSE(this_task::is_cancelled());
  runtime rt(loops(1));
  CHECK_FALSE(rt.block_on([]() -> task<bool> { co_return this_task::is_cancelled(); }()));
}

TEST_CASE("cancel racing completion: either the value or stopped, never both or neither") {
  runtime rt(loops(2));
  int values = 0, stops = 0, neither = 0;
  for (int round = 0; round < 2000; ++round) {
    auto h = rt.spawn([]() -> task<int> {
      co_await yield();
      co_return 7;
    }());
    if (round % 3 != 0) h.cancel();
    outcome<int> o = rt.block_on([](join_handle<int>& jh) -> task<outcome<int>> { co_return co_await jh.outcome(); }(h));
    if (o.has_value() && o.value() == 7 && !o.stopped()) ++values;
    else if (o.stopped() && !o.has_value() && !o.error()) ++stops;
    else ++neither;
  }
  CHECK(neither == 0);
  CHECK(values >= 2000 / 3);  // the rounds nobody cancelled, at least
  CHECK(stops > 0);           // and the cancels did stop some
}

TEST_CASE("cancelling a joiner racing the joined task's completion wakes it exactly once") {
  runtime rt(loops(2));
  for (int round = 0; round < 1000; ++round) {
    auto joiner = rt.spawn([]() -> task<int> {
      auto h = spawn([]() -> task<int> {
        co_await yield();
        co_return 3;
      }());
      co_return co_await h;
    }());
    joiner.cancel();
    try {
      int v = joiner.join_blocking();
      CHECK(v == 3);
    } catch (const cancelled&) {
    }
  }
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (rt.stats().live_tasks != 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(100us);
  CHECK(rt.stats().live_tasks == 0);
}

TEST_CASE("cancel racing a spawned task's end never touches its freed context") {
  // The context is freed as soon as the task quiesces while the join cell
  // lives on; a cancel() from another thread may be reading the context at
  // that moment (a use-after-free here shows under ASan and TSan).
  runtime rt(loops(2));
  for (int round = 0; round < 2000; ++round) {
    auto h = rt.spawn([](int r) -> task<int> {
      if (r % 2) co_await yield();
      co_return r;
    }(round));
    std::thread other([&h] {
      for (int i = 0; i < 20; ++i) h.cancel();
    });
    for (int i = 0; i < 20; ++i) h.cancel();
    other.join();
    int got = -1;
    try {
      got = h.join_blocking();
    } catch (const cancelled&) {
      got = round;  // cancelled in time: as good an end as the value
    }
    CHECK(got == round);
    h.cancel();  // after the join: nothing left to stop, and no error
  }
  CHECK(eventually([&] { return rt.stats().live_tasks == 0; }));
}

TEST_CASE("a join_handle dropped as its task ends frees the task exactly once") {
  counted::reset();
  {
    runtime rt(loops(2));
    for (int round = 0; round < 2000; ++round) {
      auto h = rt.spawn([](counted c) -> task<int> {
        co_await yield();
        co_return c.id;
      }(counted{}));
      if (round % 2) h.cancel();
      std::thread dropper([h = std::move(h)]() mutable { h = {}; });
      dropper.join();
    }
    CHECK(eventually([&] { return rt.stats().live_tasks == 0; }));
  }
  CHECK(counted::alive() == 0);
}

TEST_CASE("a spawned task cancelled or detached while still queued frees its frame and captures exactly once") {
  // Until a loop claims it, a spawned task is only its frame and join cell
  // waiting in a queue; a cancel or a dropped handle there must still end it
  // exactly once.
  counted::reset();
  {
    runtime rt(loops(1));
    rt.block_on([]() -> task<void> {
      auto cancelled_one = spawn([](counted c) -> task<int> { co_return c.id; }(counted{}));
      auto dropped_one = spawn([](counted c) -> task<int> { co_return c.id; }(counted{}));
      cancelled_one.cancel();  // still queued: this loop is busy running us
      dropped_one = {};
      CHECK(co_await test::ends_cancelled(cancelled_one));
    }());
    CHECK(eventually([&] { return rt.stats().live_tasks == 0; }));
  }
  CHECK(counted::alive() == 0);
}


// ---- stopping: no catch sees it, destructors do -------------------------------

TEST_CASE("no catch block in a cancelled task sees the cancellation, not even catch (...)") {
  runtime rt(loops(2));
  never::parked = 0;
  std::atomic<bool> caught{false}, returned{false}, stopped{false};
  auto h = rt.spawn([](std::atomic<bool>& c, std::atomic<bool>& r, std::atomic<bool>& s) -> task<int> {
    test::stop_mark mark{s};
    try {
      co_await never{};
    } catch (...) {
      c = true;  // the bug class this model removes: swallowing the cancel
    }
    r = true;
    co_return 42;
  }(caught, returned, stopped));
  REQUIRE(eventually([] { return never::parked == 1; }));
  h.cancel();
  outcome<int> o = rt.block_on([](join_handle<int>& jh) -> task<outcome<int>> { co_return co_await jh.outcome(); }(h));
  CHECK(o.stopped());
  CHECK_FALSE(caught);
  CHECK_FALSE(returned);
  CHECK(stopped);
}

TEST_CASE("a task cancelled while sleeping in a try block stops: the catch does not run, the timer is disarmed") {
  runtime rt(loops(1));
  std::atomic<bool> caught{false};
  auto h = rt.spawn([](std::atomic<bool>& c) -> task<int> {
    try {
      co_await sleep_for(1h);
    } catch (...) {
      c = true;
    }
    co_return 42;
  }(caught));
  REQUIRE(eventually([&] { return rt.stats().timers == 1; }));
  h.cancel();
  CHECK_THROWS_AS(h.join_blocking(), cancelled);
  CHECK_FALSE(caught);
  CHECK(eventually([&] { return rt.stats().timers == 0; }));
}

TEST_CASE("a lock_guard held across the stopping suspension point unlocks as the frame goes") {
  runtime rt(loops(2));
  actor_lock lock;
  never::parked = 0;
  auto h = rt.spawn([](actor_lock& l) -> task<void> {
    lock_guard g = co_await l.acquire();
    co_await never{};
  }(lock));
  REQUIRE(eventually([] { return never::parked == 1; }));
  CHECK(lock.locked());
  h.cancel();
  CHECK(finishes_cancelled(h));
  CHECK_FALSE(lock.locked());
  // And the next one gets it.
  CHECK(rt.block_on([](actor_lock& l) -> task<bool> {
    lock_guard g = co_await l.acquire(generous);
    co_return g.owns_lock();
  }(lock)));
}

namespace {
// A chain of `depth` nested tasks, each holding a counted local, parked
// at the innermost one.
task<int> nested(int depth) {
  counted here;
  if (depth == 0) {
    co_await never{};
    co_return 0;
  }
  co_return co_await nested(depth - 1) + 1;
}
}  // namespace

TEST_CASE("stopping a chain of nested tasks destroys every frame and local exactly once, innermost first") {
  counted::reset();
  {
    runtime rt(loops(2));
    never::parked = 0;
    auto h = rt.spawn(nested(50));
    REQUIRE(eventually([] { return never::parked == 1; }));
    CHECK(counted::alive() == 51);
    h.cancel();
    CHECK(finishes_cancelled(h));
    CHECK(counted::alive() == 0);
    CHECK(counted::destructions() == counted::constructions());
  }
  CHECK(counted::alive() == 0);
}

TEST_CASE("a stopped chain is unwound innermost first") {
  runtime rt(loops(1));
  std::vector<int> order;
  never::parked = 0;
  auto level = [](std::vector<int>& o, int n, auto& self) -> task<void> {
    test::at_exit record{[&o, n] { o.push_back(n); }};
    if (n == 3) co_await never{};
    else co_await self(o, n + 1, self);
  };
  auto h = rt.spawn(level(order, 0, level));
  REQUIRE(eventually([] { return never::parked == 1; }));
  h.cancel();
  CHECK(finishes_cancelled(h));
  CHECK(order == std::vector<int>{3, 2, 1, 0});
}

TEST_CASE("a million-deep chain stops at its innermost await without overflowing the stack") {
  // Under the sanitizers a frame is several times larger; a tenth of the
  // depth keeps the test's memory in bounds there and still far exceeds
  // what recursive destruction would survive.
  const int depth = test::sanitized ? 100'000 : 1'000'000;
  runtime rt(loops(1));
  never::parked = 0;
  std::atomic<long> gone{0};
  struct chain {
    static task<int> link(int n, std::atomic<long>& g) {
      test::at_exit count{[&g] { ++g; }};
      if (n == 0) {
        co_await never{};
        co_return 0;
      }
      co_return co_await link(n - 1, g) + 1;
    }
  };
  auto h = rt.spawn(chain::link(depth, gone));
  REQUIRE(eventually([] { return never::parked == 1; }, 60s));
  h.cancel();
  CHECK(finishes_cancelled(h));
  CHECK(gone == depth + 1);
}

// ---- outcome() --------------------------------------------------------------

TEST_CASE("outcome() says value, error or stopped, and never throws for the task's sake") {
  runtime rt(loops(2));
  never::parked = 0;
  rt.block_on([]() -> task<void> {
    auto v = spawn([]() -> task<int> { co_return 5; }());
    auto e = spawn([]() -> task<int> {
      throw std::runtime_error("boom");
      co_return 0;
    }());
    auto s = spawn([]() -> task<int> {
      co_await never{};
      co_return 0;
    }());
    co_await yield();
    s.cancel();

    outcome<int> ov = co_await v.outcome();
    CHECK(ov.has_value());
    CHECK_FALSE(ov.stopped());
    CHECK_FALSE(ov.error());
    CHECK(ov.value() == 5);

    outcome<int> oe = co_await e.outcome();
    CHECK_FALSE(oe.has_value());
    CHECK_FALSE(oe.stopped());
    REQUIRE(oe.error());
    CHECK_THROWS_WITH_AS(oe.value(), "boom", std::runtime_error);

    outcome<int> os = co_await s.outcome();
    CHECK(os.stopped());
    CHECK_FALSE(os.has_value());
    CHECK_FALSE(os.error());
    CHECK_THROWS_AS(os.value(), cancelled);
  }());
}

TEST_CASE("outcome of void and of a move-only value; a moved-from outcome is empty") {
  runtime rt(loops(1));
  rt.block_on([]() -> task<void> {
    auto hv = spawn([]() -> task<void> { co_return; }());
    outcome<void> ov = co_await hv.outcome();
    CHECK(ov.has_value());
    ov.value();
    auto hp = spawn([]() -> task<std::unique_ptr<int>> { co_return std::make_unique<int>(9); }());
    outcome<std::unique_ptr<int>> op = co_await hp.outcome();
    REQUIRE(op.has_value());
    outcome<std::unique_ptr<int>> moved = std::move(op);
    CHECK(*moved.value() == 9);
    CHECK_FALSE(op.has_value());
    CHECK_THROWS_AS(op.value(), std::logic_error);
    CHECK_THROWS_AS(co_await hp.outcome(), std::logic_error);  // taken already
  }());
}

TEST_CASE("a task body that throws cancelled itself ends stopped, and block_on of it throws cancelled") {
  runtime rt(loops(1));
  auto h = rt.spawn([]() -> task<int> {
    throw cancelled();
    co_return 1;
  }());
  outcome<int> o = rt.block_on([](join_handle<int>& jh) -> task<outcome<int>> { co_return co_await jh.outcome(); }(h));
  CHECK(o.stopped());
  CHECK_THROWS_AS(rt.block_on([]() -> task<int> {
                    throw cancelled();
                    co_return 1;
                  }()),
                  cancelled);
}

TEST_CASE("a detached task that stops is not an error for on_error") {
  std::atomic<int> reported{0};
  {
    runtime_options o = loops(2);
    o.on_error = [&reported](std::exception_ptr) { ++reported; };
    runtime rt(o);
    never::parked = 0;
    {
      auto parked = rt.spawn([]() -> task<void> { co_await never{}; }());
      REQUIRE(eventually([] { return never::parked == 1; }));
      parked.cancel();
    }  // detached while its stop is on the way
    rt.spawn([]() -> task<void> {
      throw cancelled();
      co_return;
    }());  // detached at once; stops by its own throw
    rt.spawn([]() -> task<void> {
      throw std::runtime_error("a real error");
      co_return;
    }());  // the control: this one is reported
    CHECK(eventually([&] { return rt.stats().live_tasks == 0; }));
    CHECK(eventually([&] { return reported == 1; }));
  }
  CHECK(reported == 1);
}

// ---- shielded() ---------------------------------------------------------------

TEST_CASE("shielded runs its task to the end while the enclosing task is cancelled; the stop lands right after") {
  runtime rt(loops(2));
  std::atomic<bool> cleanup_started{false}, cleanup_done{false}, after_shield{false}, after_next_point{false};
  auto h = rt.spawn([](std::atomic<bool>& started, std::atomic<bool>& done, std::atomic<bool>& after,
                       std::atomic<bool>& past) -> task<int> {
    auto cleanup = [](std::atomic<bool>& st, std::atomic<bool>& d) -> task<int> {
      st = true;
      co_await sleep_for(30ms);  // a suspension point that does not stop inside the shield
      CHECK_FALSE(this_task::is_cancelled());
      co_await yield();
      d = true;
      co_return 7;
    };
    int v = co_await shielded(cleanup(started, done));
    after = (v == 7);
    CHECK(this_task::is_cancelled());
    co_await yield();  // the first point after the shield: stops here
    past = true;
    co_return v;
  }(cleanup_started, cleanup_done, after_shield, after_next_point));
  REQUIRE(eventually([&] { return cleanup_started.load(); }));
  h.cancel();
  CHECK(finishes_cancelled(h));
  CHECK(cleanup_done);
  CHECK(after_shield);
  CHECK_FALSE(after_next_point);
}

TEST_CASE("shielded of an empty task is invalid") {
  CHECK_THROWS_AS(static_cast<void>(shielded(task<int>{})), std::invalid_argument);
}

// ---- races ----------------------------------------------------------------------

TEST_CASE("cancel racing completion and handle drop, 10,000 rounds: every frame destroyed exactly once") {
  counted::reset();
  {
    runtime rt(loops(2));
    int values = 0, stops = 0;
    for (int round = 0; round < 10'000; ++round) {
      auto h = rt.spawn([](counted c, int r) -> task<int> {
        if (r % 3 != 0) co_await yield();
        if (r % 5 == 0) co_await sleep_for(0ms);
        co_return c.id >= 0 ? 1 : 0;
      }(counted{}, round));
      // From a foreign thread: cancel, and on some rounds drop the handle too
      // (a handle object is one thread's at a time: this thread leaves it
      // alone on those rounds).
      const bool dropped = round % 4 == 1;
      std::thread other([&h, dropped] {
        h.cancel();
        if (dropped) h = {};
      });
      if (round % 2 == 0) h.cancel();  // and from this thread, racing it
      other.join();
      if (dropped) continue;
      outcome<int> o = rt.block_on([](join_handle<int>& jh) -> task<outcome<int>> { co_return co_await jh.outcome(); }(h));
      if (o.has_value()) ++values;
      else if (o.stopped()) ++stops;
    }
    CHECK(values + stops > 0);
    CHECK(stops > 0);
    CHECK(eventually([&] { return rt.stats().live_tasks == 0; }));
  }
  CHECK(counted::alive() == 0);
  CHECK(counted::destructions() == counted::constructions());
}
