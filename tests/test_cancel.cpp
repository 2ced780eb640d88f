// tests/test_cancel.cpp — cancellation: delivered at every suspension point,
// prompt for a parked task, never lost when it lands before the next
// suspension point, and racing completion without double or missing wakes.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>
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

TEST_CASE("cancelling a task parked where nothing else would resume it wakes it with cancelled") {
  runtime rt(loops(2));
  never::parked = 0;
  auto h = rt.spawn([]() -> task<void> { co_await never{}; }());
  while (never::parked == 0) std::this_thread::yield();
  h.cancel();
  CHECK(finishes_cancelled(h));
}

TEST_CASE("cancelling a task suspended on yield throws cancelled from the yield") {
  runtime rt(loops(1));
  std::atomic<int> rounds{0};
  auto h = rt.spawn([](std::atomic<int>& r) -> task<void> {
    for (;;) {
      ++r;
      co_await yield();
    }
  }(rounds));
  while (rounds < 100) std::this_thread::yield();
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
  while (never::parked == 0) std::this_thread::yield();
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
    co_await never{};  // must throw at once instead of parking
    co_return 1;
  }(computing, go_on));
  while (!computing) std::this_thread::yield();
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

TEST_CASE("cancel racing completion: either the value or cancelled, never both or neither") {
  runtime rt(loops(2));
  int values = 0, cancels = 0;
  for (int round = 0; round < 2000; ++round) {
    auto h = rt.spawn([]() -> task<int> {
      co_await yield();
      co_return 7;
    }());
    if (round % 3 != 0) h.cancel();
    try {
      int v = h.join_blocking();
      CHECK(v == 7);
      ++values;
    } catch (const cancelled&) {
      ++cancels;
    }
  }
  CHECK(values + cancels == 2000);
  CHECK(values >= 2000 / 3);
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

TEST_CASE("tasks cancelled on one loop share one cancelled exception object instead of a copy each") {
  // A million cancelled tasks waiting to be joined would otherwise hold a
  // million exception objects (W3: 480 MB of RSS before, 280 MB after).
  runtime rt(loops(1));
  rt.block_on([]() -> task<void> {
    auto a = spawn([]() -> task<void> { co_await never{}; }());
    auto b = spawn([]() -> task<void> { co_await never{}; }());
    co_await yield();  // both start and park
    a.cancel();
    b.cancel();
    const void* seen[2] = {};
    int i = 0;
    for (auto* h : {&a, &b}) {
      try {
        co_await *h;
      } catch (const cancelled& e) {
        seen[i] = &e;
      }
      ++i;
    }
    CHECK(seen[0] != nullptr);
    CHECK(seen[0] == seen[1]);
  }());
}
