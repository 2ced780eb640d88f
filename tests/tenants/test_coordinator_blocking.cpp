// tests/tenants/test_coordinator_blocking.cpp — blocking jobs through a
// coordinator: they run on the runtime's pool and their value or exception
// comes back to the caller, they are held to max_concurrency like coroutine
// jobs, a running one is stopped through its std::stop_token (its slot freed
// only once it has stopped), and one whose caller stops while it waits, in
// the coordinator's queue or in the pool's, never runs and counts withdrawn.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <weft/coordinator.hpp>
#include <weft/weft.hpp>

#include "coordinator_support.hpp"
#include "stop_probe.hpp"
#include "support.hpp"

using namespace weft;
using namespace std::chrono_literals;
using namespace test;  // support.hpp and coordinator_support.hpp

TEST_SUITE("coordinator") {

TEST_CASE("a blocking job runs on the pool and its value comes back to the caller's loop") {
  runtime rt(loops(1));  // one loop: "the caller's" cannot be a peer that took the task
  coordinator c(limits(1, 5));
  auto caller = [](coordinator& co) -> task<bool> {
    const auto loop_thread = std::this_thread::get_id();
    std::thread::id pool_thread;
    int v = co_await co.execute([&pool_thread] {
      pool_thread = std::this_thread::get_id();
      return 42;
    });
    co_return v == 42 && pool_thread != loop_thread && std::this_thread::get_id() == loop_thread;
  };
  CHECK(rt.block_on(caller(c)));
  CHECK(c.stats().completed == 1);
}

TEST_CASE("a blocking job's exception reaches the caller and the next blocking job still runs") {
  runtime rt(loops(2));
  coordinator c(limits(1, 5));
  CHECK_THROWS_AS(rt.block_on(c.execute([]() -> int { throw job_error("blocking failed"); })), job_error);
  CHECK(rt.block_on(c.execute([] { return std::string("next"); })) == "next");
  CHECK(c.stats().completed == 2);
}

TEST_CASE("blocking jobs are held to max_concurrency too") {
  runtime rt(loops(2));
  coordinator c(limits(2, 20));
  occupancy occ;
  std::atomic<bool> go{false};
  auto caller = [](coordinator& co, occupancy& o, std::atomic<bool>& g) -> task<int> {
    co_return co_await co.execute([&o, &g] {
      o.enter();
      while (!g) std::this_thread::yield();
      o.leave();
      return 1;
    });
  };
  std::vector<join_handle<int>> hs;
  for (int i = 0; i < 10; ++i) hs.push_back(rt.spawn(caller(c, occ, go)));
  REQUIRE(eventually([&] { return settled(c.stats(), 2, 8) && occ.inside == 2; }, hang_limit));
  go = true;
  for (auto& h : hs) CHECK(h.join_blocking() == 1);
  CHECK(occ.most == 2);
  CHECK(occ.entered == 10);
}

TEST_CASE("cancelling the caller of a running blocking job stops it through its stop_token; "
          "the slot is freed only after it stopped") {
  runtime rt(loops(2));
  coordinator c(limits(1, 5));
  std::atomic<bool> started{false}, saw_stop{false}, returned{false}, returned_at_stop{false};
  auto caller = [](coordinator& co, std::atomic<bool>& st, std::atomic<bool>& ss, std::atomic<bool>& ret,
                   std::atomic<bool>& rs) -> task<void> {
    auto job = [&st, &ss, &ret](std::stop_token tok) {
      st = true;
      const auto end = std::chrono::steady_clock::now() + hang_limit;
      while (!tok.stop_requested() && std::chrono::steady_clock::now() < end) std::this_thread::yield();
      ss = tok.stop_requested();
      ret = true;
    };
    // Stopped, the caller's frame goes only after the job has returned.
    test::at_exit check{[&ret, &rs] { rs = ret.load(); }};
    co_await co.execute(std::move(job));
  };
  auto h = rt.spawn(caller(c, started, saw_stop, returned, returned_at_stop));
  REQUIRE(eventually([&] { return started.load(); }, hang_limit));
  occupancy occ;
  task_gate g;
  g.open();
  auto next = rt.spawn(gated_call(c, g, occ, 5));
  REQUIRE(eventually([&] { return settled(c.stats(), 1, 1); }, hang_limit));
  h.cancel();
  CHECK_THROWS_AS(h.join_blocking(), cancelled);
  CHECK(returned_at_stop);
  CHECK(saw_stop);
  CHECK(next.join_blocking() == 5);
  auto s = c.stats();
  CHECK(s.completed == 2);
  CHECK(settled(s, 0, 0));
}

TEST_CASE("cancelling the caller of a queued blocking job: it never reaches the pool") {
  runtime rt(loops(2));
  coordinator c(limits(1, 5));
  task_gate g;
  occupancy occ;
  auto holder = rt.spawn(gated_call(c, g, occ, 1));
  REQUIRE(eventually([&] { return settled(c.stats(), 1, 0); }, hang_limit));
  std::atomic<bool> ran{false};
  auto caller = [](coordinator& co, std::atomic<bool>& r) -> task<void> {
    co_await co.execute([&r] { r = true; });
  };
  auto h = rt.spawn(caller(c, ran));
  REQUIRE(eventually([&] { return settled(c.stats(), 1, 1); }, hang_limit));
  h.cancel();
  CHECK(outcome_of(h) == "cancelled");
  g.open();
  CHECK(holder.join_blocking() == 1);
  CHECK_FALSE(ran);
  CHECK(c.stats().withdrawn == 1);
}

TEST_CASE("a blocking job whose caller stops while it waits in the pool's queue counts as withdrawn, not completed") {
  runtime_options o = loops(2);
  o.blocking.max_threads = 1;  // one pool thread, which the first job occupies
  runtime rt(o);
  coordinator c(limits(2, 5));
  std::latch release(1);
  std::atomic<bool> busy{false}, ran{false};
  auto occupier = rt.spawn([](coordinator& co, std::latch& l, std::atomic<bool>& b) -> task<void> {
    co_await co.execute([&l, &b] {
      b = true;
      l.wait();
    });
  }(c, release, busy));
  REQUIRE(eventually([&] { return busy.load(); }, hang_limit));
  auto h = rt.spawn([](coordinator& co, std::atomic<bool>& r) -> task<void> {
    co_await co.execute([&r] { r = true; });
  }(c, ran));
  REQUIRE(eventually([&] { return rt.blocking().stats().queued == 1; }, hang_limit));
  h.cancel();
  CHECK(outcome_of(h) == "cancelled");
  release.count_down();
  occupier.join_blocking();
  CHECK_FALSE(ran);
  auto s = c.stats();
  CHECK(s.withdrawn == 1);
  CHECK(s.completed == 1);  // the occupier alone
  CHECK(settled(s, 0, 0));
}

}  // TEST_SUITE
