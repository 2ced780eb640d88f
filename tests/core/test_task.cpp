// tests/core/test_task.cpp — task<T>: laziness, results, exceptions, references,
// move-only values, lifetimes, and a million-deep await chain.
#include <doctest/doctest.h>

#include <memory>
#include <stdexcept>
#include <string>

#include <weft/weft.hpp>

#include "counted.hpp"

using namespace weft;

namespace {
runtime_options two_loops() {
  runtime_options o;
  o.loops = 2;
  return o;
}

task<int> answer() { co_return 42; }
task<void> nothing() { co_return; }
task<int> thrower() {
  throw std::runtime_error("boom");
  co_return 0;
}
task<int> chain(int n) {
  if (n == 0) co_return 0;
  co_return 1 + co_await chain(n - 1);
}
}  // namespace

TEST_CASE("task doesn't start until awaited") {
  runtime rt(two_loops());
  bool started = false;
  auto make = [&]() -> task<int> {
    started = true;
    co_return 1;
  };
  auto t = make();
  CHECK_FALSE(started);
  CHECK(rt.block_on(std::move(t)) == 1);
  CHECK(started);
}

TEST_CASE("task yields its value, void and references") {
  runtime rt(two_loops());
  CHECK(rt.block_on(answer()) == 42);
  rt.block_on(nothing());
  int x = 5;
  auto ref = [&]() -> task<int&> { co_return x; };
  int& r = rt.block_on([&]() -> task<int&> { co_return co_await ref(); }());
  CHECK(&r == &x);
}

TEST_CASE("task carries move-only values") {
  runtime rt(two_loops());
  auto p = rt.block_on([]() -> task<std::unique_ptr<std::string>> {
    co_return std::make_unique<std::string>("moved");
  }());
  REQUIRE(p);
  CHECK(*p == "moved");
}

TEST_CASE("exceptions propagate through nested tasks") {
  runtime rt(two_loops());
  auto outer = []() -> task<int> {
    auto inner = []() -> task<int> { co_return co_await thrower(); };
    co_return co_await inner();
  };
  CHECK_THROWS_WITH_AS(rt.block_on(outer()), "boom", std::runtime_error);
}

TEST_CASE("lots of nested awaits don't overflow the stack") {
  runtime rt(two_loops());
  CHECK(rt.block_on(chain(1'000'000)) == 1'000'000);
}

TEST_CASE("lots of synchronous completions in a loop don't overflow the stack") {
  runtime rt(two_loops());
  auto loop = []() -> task<long> {
    long sum = 0;
    for (int i = 0; i < 1'000'000; ++i) sum += co_await answer();
    co_return sum;
  };
  CHECK(rt.block_on(loop()) == 42'000'000L);
}

TEST_CASE("an unawaited task destroys its frame and captures exactly once") {
  counted::reset();
  {
    auto t = [](counted c) -> task<int> { co_return c.id; }(counted{});
    CHECK(counted::alive() >= 1);
  }
  CHECK(counted::alive() == 0);
}

TEST_CASE("an awaited task destroys its frame and captures exactly once") {
  counted::reset();
  {
    runtime rt(two_loops());
    rt.block_on([]() -> task<void> {
      auto t = [](counted c) -> task<int> { co_return c.id; }(counted{});
      co_await t;
    }());
  }
  CHECK(counted::alive() == 0);
  CHECK(counted::destructions() == counted::constructions());
}

TEST_CASE("awaiting an empty task is a logic error") {
  runtime rt(two_loops());
  CHECK_THROWS_AS(rt.block_on([]() -> task<int> {
    task<int> t = answer();
    task<int> moved = std::move(t);
    co_await moved;
    co_return co_await t;
  }()),
                  std::logic_error);
}
