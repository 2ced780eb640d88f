// tests/core/test_when_all.cpp — when_all and when_any: concurrency, results in
// order, the first failure cancelling siblings, the first finisher winning,
// and cancellation of the parent reaching the children.
#include <doctest/doctest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <weft/weft.hpp>

#include "support.hpp"

#include "counted.hpp"
#include "never.hpp"
#include "stop_probe.hpp"

using namespace weft;
using test::eventually;
using test::finishes_cancelled;
using test::generous;
using test::loops;

namespace {
task<int> value(int v) {
  co_await yield();
  co_return v;
}
task<void> fail_after_yield() {
  co_await yield();
  throw std::runtime_error("child failed");
}
// Parks until cancelled; counts its frame going (it can only stop).
task<void> park_counting(std::atomic<int>& stopped_children) {
  test::at_exit stopped{[&stopped_children] { ++stopped_children; }};
  co_await never{};
}
}  // namespace

TEST_CASE("when_all of a pack yields every result in order, void as monostate") {
  runtime rt(loops(2));
  auto [a, b, c] = rt.block_on(when_all(value(1), []() -> task<void> { co_return; }(), value(3)));
  CHECK(a == 1);
  CHECK(std::holds_alternative<std::monostate>(std::variant<std::monostate>(b)));
  CHECK(c == 3);
}

TEST_CASE("when_all of a vector yields every result in order") {
  runtime rt(loops(2));
  std::vector<task<int>> ts;
  for (int i = 0; i < 500; ++i) ts.push_back(value(i));
  auto out = rt.block_on(when_all(std::move(ts)));
  REQUIRE(out.size() == 500);
  for (int i = 0; i < 500; ++i) CHECK(out[i] == i);
  CHECK(rt.block_on(when_all(std::vector<task<int>>{})).empty());
}

TEST_CASE("when_all children run concurrently") {
  runtime rt(loops(2));
  // Each child waits for the other: only concurrent children can both finish.
  std::atomic<int> arrived{0};
  auto meet = [](std::atomic<int>& a) -> task<void> {
    ++a;
    while (a < 2) co_await yield();
  };
  rt.block_on(when_all(meet(arrived), meet(arrived)));
  CHECK(arrived == 2);
}

TEST_CASE("when_all rethrows the first failure after cancelling and awaiting the others") {
  runtime rt(loops(2));
  never::parked = 0;
  std::atomic<int> cancelled_children{0};
  std::vector<task<void>> ts;
  for (int i = 0; i < 5; ++i) ts.push_back(park_counting(cancelled_children));
  ts.push_back(fail_after_yield());
  CHECK_THROWS_WITH_AS(rt.block_on(when_all(std::move(ts))), "child failed", std::runtime_error);
  CHECK(cancelled_children == 5);  // all of them awaited before the rethrow
}

TEST_CASE("when_any yields the first to finish and cancels the rest") {
  runtime rt(loops(2));
  std::atomic<int> cancelled_children{0};
  auto loser = [](std::atomic<int>& cc) -> task<int> {
    co_await park_counting(cc);
    co_return -1;
  };
  std::vector<task<int>> ts;
  ts.push_back(loser(cancelled_children));
  ts.push_back(value(42));
  ts.push_back(loser(cancelled_children));
  auto [index, v] = rt.block_on(when_any(std::move(ts)));
  CHECK(index == 1);
  CHECK(v == 42);
  CHECK(cancelled_children == 2);
}

TEST_CASE("when_any of nothing is invalid") {
  runtime rt(loops(1));
  CHECK_THROWS_AS(rt.block_on(when_any(std::vector<task<int>>{})), std::invalid_argument);
}

TEST_CASE("cancelling the parent of when_all cancels and awaits its children") {
  runtime rt(loops(2));
  never::parked = 0;
  std::atomic<int> cancelled_children{0};
  auto h = rt.spawn([](std::atomic<int>& cc) -> task<void> {
    co_await when_all(park_counting(cc), park_counting(cc), park_counting(cc));
  }(cancelled_children));
  test::wait_for([] { return never::parked >= 3; }, "three children to park");
  h.cancel();
  CHECK_THROWS_AS(h.join_blocking(), cancelled);
  CHECK(cancelled_children == 3);
}

TEST_CASE("when_all destroys every child frame and capture exactly once") {
  counted::reset();
  {
    runtime rt(loops(2));
    std::vector<task<int>> ts;
    for (int i = 0; i < 100; ++i) ts.push_back([](counted c) -> task<int> {
      co_await yield();
      co_return c.id > 0 ? 1 : 0;
    }(counted{}));
    auto out = rt.block_on(when_all(std::move(ts)));
    CHECK(out.size() == 100);
  }
  CHECK(counted::alive() == 0);
}

TEST_CASE("when_all of a vector holding an empty task is invalid and destroys the other frames exactly once") {
  counted::reset();
  {
    runtime rt(loops(1));
    std::vector<task<int>> ts;
    ts.push_back([](counted c) -> task<int> { co_return c.id; }(counted{}));
    ts.push_back(task<int>{});
    ts.push_back([](counted c) -> task<int> { co_return c.id; }(counted{}));
    CHECK_THROWS_AS(rt.block_on(when_all(std::move(ts))), std::invalid_argument);
  }
  CHECK(counted::alive() == 0);
}

TEST_CASE("when_any stops every loser before it returns: their frames are gone") {
  counted::reset();
  runtime rt(loops(2));
  std::atomic<int> started{0}, stopped{0};
  // A loser holds a counted in its frame from creation (a parameter), so its
  // frame is gone exactly when the count is back: whether it was stopped at
  // its sleep, or cancelled before any loop ran it (the winner may finish on
  // the other loop first).
  auto loser = [](counted held, std::atomic<int>& in, std::atomic<int>& out) -> task<int> {
    ++in;
    test::at_exit gone{[&out] { ++out; }};
    co_await sleep_for(std::chrono::hours(1));
    co_return held.id;
  };
  std::vector<task<int>> ts;
  for (int i = 0; i < 100; ++i) ts.push_back(loser(counted{}, started, stopped));
  ts.push_back(value(5));
  auto [index, v] = rt.block_on(when_any(std::move(ts)));
  CHECK(index == 100);
  CHECK(v == 5);
  CHECK(counted::alive() == 0);
  CHECK(stopped == started);
  CHECK(eventually([&] { return rt.stats().timers == 0; }));
}
