// tests/tenants/test_coordinator.cpp — coordinator admission: the concurrency and
// queue limits, FIFO start order, refusal at once with the exact message,
// cancellation of queued and running coroutine jobs, jobs that throw, lazy
// admission, the callable's lifetime, close(), and the coordinator's own
// lifetime against detached jobs and runtime shutdown. The random mixes are
// in test_coordinator_mixes.cpp, blocking jobs in test_coordinator_blocking.cpp,
// tenants in test_tenants.cpp; what they share in coordinator_support.hpp.
//
// Orderings are forced with task gates and by waiting for the coordinator's
// own figures; timed waits only catch hangs.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <weft/coordinator.hpp>
#include <weft/weft.hpp>

#include "coordinator_support.hpp"
#include "counted.hpp"
#include "never.hpp"
#include "stop_probe.hpp"
#include "support.hpp"

using namespace weft;
using namespace std::chrono_literals;
using namespace test;  // support.hpp and coordinator_support.hpp

TEST_SUITE("coordinator") {

TEST_CASE("no more than max_concurrency jobs run at once, observed inside the jobs, from two loops") {
  runtime rt(loops(2));
  coordinator c(limits(3, 1000));
  task_gate g;
  occupancy occ;
  std::vector<join_handle<int>> callers;
  for (int i = 0; i < 200; ++i) callers.push_back(rt.spawn(gated_call(c, g, occ, i)));
  REQUIRE(eventually([&] { return settled(c.stats(), 3, 197); }, hang_limit));
  CHECK(occ.inside == 3);
  g.open();
  long sum = 0;
  for (auto& h : callers) sum += h.join_blocking();
  CHECK(sum == 199 * 200 / 2);
  CHECK(occ.most == 3);
  CHECK(occ.entered == 200);
  auto s = c.stats();
  CHECK(settled(s, 0, 0));
  CHECK(s.completed == 200);
  CHECK(s.rejected == 0);
}

TEST_CASE("jobs that suspend repeatedly never exceed the limit, with callers on two loops") {
  runtime rt(loops(2));
  coordinator c(limits(2, 10'000));
  occupancy occ;
  auto caller = [](coordinator& co, occupancy& o) -> task<void> {
    auto job = [&o]() -> task<void> {
      o.enter();
      for (int k = 0; k < 3; ++k) co_await yield();
      o.leave();
    };
    co_await co.execute(std::move(job));
  };
  std::vector<join_handle<void>> callers;
  for (int i = 0; i < 2000; ++i) callers.push_back(rt.spawn(caller(c, occ)));
  for (auto& h : callers) h.join_blocking();
  CHECK(occ.most <= 2);
  CHECK(occ.entered == 2000);
  CHECK(c.stats().completed == 2000);
}

TEST_CASE("waiting jobs start in the order they arrived") {
  runtime rt(loops(2));
  coordinator c(limits(1, 10));
  task_gate first_done;
  occupancy occ;
  std::mutex mu;
  std::vector<int> started;
  auto first = rt.spawn(gated_call(c, first_done, occ, 0));
  REQUIRE(eventually([&] { return settled(c.stats(), 1, 0); }, hang_limit));
  auto recorded_call = [](coordinator& co, std::mutex& m, std::vector<int>& order, int i) -> task<void> {
    auto job = [&m, &order, i]() -> task<void> {
      {
        std::lock_guard<std::mutex> l(m);
        order.push_back(i);
      }
      co_await yield();
    };
    co_await co.execute(std::move(job));
  };
  std::vector<join_handle<void>> waiters;
  for (int i = 1; i <= 8; ++i) {
    // One at a time, so the arrival order is the order of the loop below.
    waiters.push_back(rt.spawn(recorded_call(c, mu, started, i)));
    REQUIRE(eventually([&] { return settled(c.stats(), 1, static_cast<std::size_t>(i)); }, hang_limit));
  }
  first_done.open();
  CHECK(first.join_blocking() == 0);
  for (auto& h : waiters) h.join_blocking();
  CHECK(started == std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8});
}

TEST_CASE("the arrival past max_concurrency + max_queue is refused at once with the exact message") {
  runtime rt(loops(2));
  coordinator c(limits(2, 3, "db"));
  task_gate g;
  occupancy occ;
  std::vector<join_handle<int>> held;
  for (int i = 0; i < 5; ++i) held.push_back(rt.spawn(gated_call(c, g, occ, i)));
  REQUIRE(eventually([&] { return settled(c.stats(), 2, 3); }, hang_limit));

  std::atomic<bool> ran{false};
  auto refused = [](coordinator& co, std::atomic<bool>& r) -> task<std::string> {
    auto job = [&r]() -> task<void> {
      r = true;
      co_return;
    };
    try {
      co_await co.execute(std::move(job));
    } catch (const rejected_execution& e) {  // too_many_tasks is one
      co_return e.what();
    }
    co_return "admitted";
  };
  // Every slot and place is held by a gated job: only a refusal at once can
  // let this return before the gate opens.
  CHECK(rt.block_on(refused(c, ran)) == "Work in progress 6 exceeds 5 jobs in db");
  CHECK(rt.block_on(refused(c, ran)) == "Work in progress 6 exceeds 5 jobs in db");
  CHECK_FALSE(ran);
  auto s = c.stats();
  CHECK(s.rejected == 2);
  CHECK(settled(s, 2, 3));

  g.open();
  for (auto& h : held) CHECK(outcome_of(h) == "value");
  CHECK(c.stats().completed == 5);
}

TEST_CASE("without a queue the second job is refused while the first runs; an unnamed coordinator says so") {
  runtime rt(loops(1));
  coordinator c(limits(1, 0));
  CHECK(c.name() == "coordinator");
  task_gate g;
  occupancy occ;
  auto first = rt.spawn(gated_call(c, g, occ, 1));
  REQUIRE(eventually([&] { return settled(c.stats(), 1, 0); }, hang_limit));
  auto second = rt.spawn(gated_call(c, g, occ, 2));
  CHECK(outcome_of(second) == "too_many_tasks: Work in progress 2 exceeds 1 jobs in coordinator");
  g.open();
  CHECK(first.join_blocking() == 1);
}

TEST_CASE("cancelling a queued job removes it at once: it never runs and its place is free") {
  runtime rt(loops(2));
  coordinator c(limits(1, 1));
  task_gate g;
  occupancy occ;
  auto running = rt.spawn(gated_call(c, g, occ, 1));
  REQUIRE(eventually([&] { return settled(c.stats(), 1, 0); }, hang_limit));
  auto queued = rt.spawn(gated_call(c, g, occ, 2));
  REQUIRE(eventually([&] { return settled(c.stats(), 1, 1); }, hang_limit));

  queued.cancel();
  // While the running job still holds its slot.
  CHECK(outcome_of(queued) == "cancelled");
  auto s = c.stats();
  CHECK(settled(s, 1, 0));
  CHECK(s.withdrawn == 1);
  // The place it held takes a new arrival, which would otherwise be refused.
  auto next = rt.spawn(gated_call(c, g, occ, 3));
  REQUIRE(eventually([&] { return settled(c.stats(), 1, 1); }, hang_limit));
  CHECK(c.stats().rejected == 0);

  g.open();
  CHECK(running.join_blocking() == 1);
  CHECK(next.join_blocking() == 3);
  CHECK(occ.entered == 2);  // the cancelled one never ran
  s = c.stats();
  CHECK(s.completed == 2);
  CHECK(s.withdrawn == 1);
}

TEST_CASE("cancelling a running coroutine job stops it at its suspension point and hands its slot on") {
  runtime rt(loops(2));
  coordinator c(limits(1, 5));
  never::parked = 0;
  std::atomic<bool> unwound{false};
  auto stuck = [](coordinator& co, std::atomic<bool>& u) -> task<void> {
    auto job = [&u]() -> task<void> {
      test::stop_mark stopped{u};
      co_await never{};
    };
    co_await co.execute(std::move(job));
  };
  auto first = rt.spawn(stuck(c, unwound));
  REQUIRE(eventually([&] { return never::parked == 1; }, hang_limit));
  task_gate g;
  g.open();
  occupancy occ;
  auto second = rt.spawn(gated_call(c, g, occ, 2));
  REQUIRE(eventually([&] { return settled(c.stats(), 1, 1); }, hang_limit));

  first.cancel();
  CHECK(outcome_of(first) == "cancelled");
  CHECK(unwound);
  CHECK(second.join_blocking() == 2);
  auto s = c.stats();
  CHECK(settled(s, 0, 0));
  CHECK(s.completed == 2);  // a job cancelled while it ran did run
  CHECK(s.withdrawn == 0);
}

TEST_CASE("a job that throws hands its slot to the next one, and its caller gets the exception") {
  runtime rt(loops(2));
  coordinator c(limits(1, 5));
  task_gate g;
  auto thrower = [](coordinator& co, task_gate& gt) -> task<int> {
    auto job = [&gt]() -> task<int> {
      co_await gt.wait();
      throw job_error("job failed");
    };
    co_return co_await co.execute(std::move(job));
  };
  auto failing = rt.spawn(thrower(c, g));
  REQUIRE(eventually([&] { return settled(c.stats(), 1, 0); }, hang_limit));
  occupancy occ;
  std::vector<join_handle<int>> after;
  for (int i = 0; i < 3; ++i) after.push_back(rt.spawn(gated_call(c, g, occ, i)));
  REQUIRE(eventually([&] { return settled(c.stats(), 1, 3); }, hang_limit));
  g.open();
  CHECK(outcome_of(failing) == "error: job failed");
  for (int i = 0; i < 3; ++i) CHECK(after[i].join_blocking() == i);
  CHECK(c.stats().completed == 4);
}

TEST_CASE("a job whose callable throws before returning its task frees its slot") {
  runtime rt(loops(1));
  coordinator c(limits(1, 0));
  auto bad = []() -> task<int> { throw job_error("no task made"); };
  CHECK_THROWS_AS(rt.block_on(c.execute(bad)), job_error);
  CHECK(rt.block_on(c.execute([]() -> task<int> { co_return 7; })) == 7);
  CHECK(c.stats().completed == 2);
}

TEST_CASE("a caller cancelled before it reaches the coordinator is not admitted and its job never runs") {
  runtime rt(loops(2));
  coordinator c(limits(1, 1));
  std::atomic<bool> computing{false}, go_on{false}, ran{false};
  auto caller = [](coordinator& co, std::atomic<bool>& comp, std::atomic<bool>& go,
                   std::atomic<bool>& r) -> task<void> {
    comp = true;
    while (!go) {
    }  // compute: no suspension point, so the cancel waits for execute
    auto job = [&r]() -> task<void> {
      r = true;
      co_return;
    };
    co_await co.execute(std::move(job));
  };
  auto h = rt.spawn(caller(c, computing, go_on, ran));
  REQUIRE(eventually([&] { return computing.load(); }, hang_limit));
  h.cancel();
  go_on = true;
  CHECK(outcome_of(h) == "cancelled");
  CHECK_FALSE(ran);
  auto s = c.stats();
  CHECK(s.completed + s.withdrawn + s.rejected == 0);
}

TEST_CASE("execute is lazy: a task never awaited reserves nothing and never runs its job") {
  runtime rt(loops(1));
  coordinator c(limits(1, 0));
  std::atomic<int> ran{0};
  auto count = [&ran]() -> task<void> {
    ++ran;
    co_return;
  };
  {
    auto unawaited = c.execute(count);
    rt.block_on(c.execute(count));  // the only slot is free
  }
  CHECK(ran == 1);
  CHECK(c.stats().completed == 1);
}

TEST_CASE("the callable lives until its job finished and is destroyed exactly once") {
  runtime rt(loops(2));
  counted::reset();
  {
    coordinator c(limits(2, 20));
    auto caller = [](coordinator& co) -> task<int> {
      auto job = [tag = counted{}]() -> task<int> {
        co_await yield();
        co_await yield();
        co_return tag.id > 0 ? counted::alive() : -1;  // reads its capture after suspending
      };
      co_return co_await co.execute(std::move(job));
    };
    std::vector<join_handle<int>> hs;
    for (int i = 0; i < 20; ++i) hs.push_back(rt.spawn(caller(c)));
    for (auto& h : hs) CHECK(h.join_blocking() > 0);
  }
  CHECK(counted::alive() == 0);
}

TEST_CASE("limits a coordinator cannot have are refused with invalid_argument naming the field") {
  auto message = [](coordinator_options o) -> std::string {
    try {
      coordinator c(std::move(o));
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "accepted";
  };
  CHECK(message(limits(0, 5)).find("max_concurrency must be at least 1") != std::string::npos);
  CHECK(message(limits(1, static_cast<std::size_t>(-1))).find("max_queue") != std::string::npos);
  CHECK(message(limits(1, 0)) == "accepted");
  CHECK_THROWS_AS(tenants(limits(0, 1)), std::invalid_argument);
}

// What execute() takes is settled at compile time.
static_assert(coordinator_job<decltype([]() -> task<int> { co_return 1; })>);
static_assert(coordinator_job<decltype([] { return 1; })>);
static_assert(coordinator_job<decltype([](std::stop_token) { return 1; })>);
static_assert(coordinator_job<decltype([p = std::unique_ptr<int>()]() -> task<void> { co_return; })>);
static_assert(!coordinator_job<decltype([](std::stop_token) -> task<int> { co_return 1; })>,
              "a callable that needs a stop_token to make its task is refused");
static_assert(!coordinator_job<decltype([](int) { return 1; })>);
static_assert(std::is_same_v<decltype(std::declval<coordinator&>().execute([] { return 1.5; })), task<double>>);
static_assert(std::is_same_v<decltype(std::declval<tenants&>().execute("t", []() -> task<int&> {
                               static int x = 0;
                               co_return x;
                             })),
                             task<int&>>);

TEST_CASE("execute awaited outside a weft task is refused with logic_error") {
  coordinator c;
  // Driven by hand, as a foreign coroutine would: no weft context is current.
  auto t = c.execute([]() -> task<void> { co_return; });
  auto h = t.release();
  h.promise().continuation = std::noop_coroutine();
  h.resume();
  CHECK_THROWS_AS(h.promise().take(), std::logic_error);
  h.destroy();
  CHECK(c.stats().completed == 0);
}

TEST_CASE("default coordinator options show: one job runs, fifty wait, the fifty-second is refused") {
  const coordinator_options defaults;
  CHECK(defaults.max_concurrency == 1);
  CHECK(defaults.max_queue == 50);
  runtime rt(loops(2));
  coordinator c;  // the defaults
  task_gate g;
  occupancy occ;
  std::vector<join_handle<int>> hs;
  for (int i = 0; i < 51; ++i) hs.push_back(rt.spawn(gated_call(c, g, occ, i)));
  REQUIRE(eventually([&] { return settled(c.stats(), 1, 50); }, hang_limit));
  auto refused = rt.spawn(gated_call(c, g, occ, 51));
  CHECK(outcome_of(refused) == "too_many_tasks: Work in progress 52 exceeds 51 jobs in coordinator");
  g.open();
  for (int i = 0; i < 51; ++i) CHECK(hs[i].join_blocking() == i);
  CHECK(occ.most == 1);
}

TEST_CASE("close refuses new work naming the coordinator, stops queued jobs, lets the running one finish") {
  runtime rt(loops(2));
  coordinator c(limits(1, 5, "ledger"));
  task_gate g;
  occupancy occ;
  // Spawned from this thread, they reach the coordinator in no fixed order:
  // one runs (held at the gate), two wait.
  std::vector<join_handle<int>> hs;
  for (int i = 0; i < 3; ++i) hs.push_back(rt.spawn(gated_call(c, g, occ, i)));
  REQUIRE(eventually([&] { return settled(c.stats(), 1, 2); }, hang_limit));
  c.close();
  // The two waiting jobs' callers stop at once, with the gate still closed.
  REQUIRE(eventually([&] { return settled(c.stats(), 1, 0); }, hang_limit));
  auto late = rt.spawn(gated_call(c, g, occ, 4));
  CHECK(outcome_of(late) == "rejected: weft: ledger is closed; it takes no new work. Use another coordinator, "
                            "or submit before close()");
  c.close();  // idempotent
  g.open();
  const endings e = endings_of(hs);
  CHECK(e.values == 1);
  CHECK(e.stopped == 2);
  auto s = c.stats();
  CHECK(s.completed == 1);
  CHECK(s.withdrawn == 2);
  CHECK(settled(s, 0, 0));
  CHECK(occ.entered == 1);
}

// ---- lifetime ------------------------------------------------------------------

TEST_CASE("a coordinator destroyed while detached jobs run and wait lets them finish") {
  runtime rt(loops(2));
  auto c = std::make_unique<coordinator>(limits(2, 5));
  task_gate g;
  occupancy occ;
  std::vector<join_handle<int>> hs;
  for (int i = 0; i < 6; ++i) hs.push_back(rt.spawn(gated_call(*c, g, occ, i)));
  REQUIRE(eventually([&] { return settled(c->stats(), 2, 4); }, hang_limit));
  c.reset();
  g.open();
  for (int i = 0; i < 6; ++i) CHECK(hs[i].join_blocking() == i);
  CHECK(occ.most == 2);
}

TEST_CASE("runtime shutdown cancels running and waiting jobs and leaves the coordinator empty") {
  coordinator c(limits(1, 10));
  never::parked = 0;
  {
    runtime rt(loops(2));
    auto stuck = [](coordinator& co) -> task<void> { co_await co.execute([]() -> task<void> { co_await never{}; }); };
    for (int i = 0; i < 5; ++i) rt.spawn(stuck(c));
    REQUIRE(eventually([&] { return settled(c.stats(), 1, 4); }, hang_limit));
    rt.shutdown();
  }
  auto s = c.stats();
  CHECK(settled(s, 0, 0));
  // Shutdown reaches the loops one after the other: a waiter on a loop not
  // yet stopping may be granted the slot its cancelled predecessor freed and
  // start, to be cancelled in turn. Every job is accounted for either way.
  CHECK(s.completed >= 1);
  CHECK(s.completed + s.withdrawn == 5);
}

}  // TEST_SUITE
