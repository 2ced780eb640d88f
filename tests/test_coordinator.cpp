// tests/test_coordinator.cpp — coordinator and tenants: the concurrency and
// queue limits, FIFO start order, refusal at once with the exact message,
// work in progress given back exactly once however a job ends (success,
// throw, cancelled while queued, cancelled while running), blocking jobs on
// the pool, tenant isolation and idle-tenant removal.
//
// Orderings are forced with gates and by waiting for the coordinator's own
// figures; timed waits only catch hangs. The randomized mixes run on one
// loop, where a seed fixes the whole interleaving.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <weft/coordinator.hpp>
#include <weft/weft.hpp>

#include "counted.hpp"
#include "never.hpp"
#include "stop_probe.hpp"
#include "support.hpp"

using namespace weft;
using namespace std::chrono_literals;
using test::outcome_of;

namespace {

constexpr auto hang_limit = 20s;

// This file's "did not hang" bound is longer than the shared one.
template <class Pred>
bool eventually_within(Pred pred) {
  return test::eventually(pred, hang_limit);
}

runtime_options loops(unsigned n) {
  runtime_options o;
  o.loops = n;
  o.blocking.name = "coord-pool";
  return o;
}

coordinator_options limits(std::size_t concurrency, std::size_t queue, std::string name = {}) {
  coordinator_options o;
  o.max_concurrency = concurrency;
  o.max_queue = queue;
  o.name = std::move(name);
  return o;
}


struct job_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A suspension point the test opens, from any thread. It follows the protocol
// of weft/detail/context.hpp: a waiter parks with a cancel hook, and exactly
// one of open() and the hook wakes it (whoever takes it off the list).
class gate {
 public:
  class waiter : weft::detail::cancel_hook {
   public:
    explicit waiter(gate* g) noexcept : g_(g) { on_cancel = &cancel; }
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> h) {
      ctx_ = weft::detail::current_context();
      if (weft::detail::is_cancelled(ctx_)) {
        cancelled_ = true;
        return false;
      }
      std::lock_guard<std::mutex> l(g_->mu_);
      if (g_->open_) return false;
      ctx_->resume_point = h;
      ctx_->hook = this;
      g_->waiters_.push_back(this);
      return true;
    }
    void await_resume() const {
      if (cancelled_) throw cancelled{};
    }

   private:
    friend class gate;
    static void cancel(weft::detail::cancel_hook* hk) noexcept {
      auto* self = static_cast<waiter*>(hk);
      {
        std::lock_guard<std::mutex> l(self->g_->mu_);
        auto& ws = self->g_->waiters_;
        auto it = std::find(ws.begin(), ws.end(), self);
        if (it == ws.end()) return;  // open() took it: its wake is the one
        ws.erase(it);
      }
      self->cancelled_ = true;
      weft::detail::wake(self->ctx_);
    }
    gate* g_;
    weft::detail::task_context* ctx_ = nullptr;
    bool cancelled_ = false;
  };

  waiter wait() noexcept { return waiter(this); }
  void open() {
    std::vector<waiter*> ws;
    {
      std::lock_guard<std::mutex> l(mu_);
      open_ = true;
      ws.swap(waiters_);
    }
    for (waiter* w : ws) weft::detail::wake(w->ctx_);
  }
  std::size_t waiting() {
    std::lock_guard<std::mutex> l(mu_);
    return waiters_.size();
  }

 private:
  std::mutex mu_;
  bool open_ = false;
  std::vector<waiter*> waiters_;
};

// Counts the jobs inside a section and remembers the most at once.
struct occupancy {
  std::atomic<int> inside{0}, most{0}, entered{0};
  void enter() {
    ++entered;
    int now = ++inside;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
  }
  void leave() { --inside; }
};

// A job that counts itself in `occ` while it waits at `g`, then returns `v`.
auto gated_job(gate& g, occupancy& occ, int v) {
  return [&g, &occ, v]() -> task<int> {
    occ.enter();
    try {
      co_await g.wait();
    } catch (...) {
      occ.leave();
      throw;
    }
    occ.leave();
    co_return v;
  };
}

// A caller whose job waits at `g` inside the coordinator, then returns `v`.
task<int> gated_call(coordinator& c, gate& g, occupancy& occ, int v) {
  co_return co_await c.execute(gated_job(g, occ, v));
}

bool settled(const coordinator_stats& s, std::size_t running, std::size_t queued) {
  return s.running == running && s.queued == queued;
}

}  // namespace

TEST_SUITE("coordinator") {

TEST_CASE("no more than max_concurrency jobs run at once, observed inside the jobs, from two loops") {
  runtime rt(loops(2));
  coordinator c(limits(3, 1000));
  gate g;
  occupancy occ;
  std::vector<join_handle<int>> callers;
  for (int i = 0; i < 200; ++i) callers.push_back(rt.spawn(gated_call(c, g, occ, i)));
  REQUIRE(eventually_within([&] { return settled(c.stats(), 3, 197); }));
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
  gate first_done;
  occupancy occ;
  std::mutex mu;
  std::vector<int> started;
  auto first = rt.spawn(gated_call(c, first_done, occ, 0));
  REQUIRE(eventually_within([&] { return settled(c.stats(), 1, 0); }));
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
    REQUIRE(eventually_within([&] { return settled(c.stats(), 1, static_cast<std::size_t>(i)); }));
  }
  first_done.open();
  CHECK(first.join_blocking() == 0);
  for (auto& h : waiters) h.join_blocking();
  CHECK(started == std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8});
}

TEST_CASE("the arrival past max_concurrency + max_queue is refused at once with the exact message") {
  runtime rt(loops(2));
  coordinator c(limits(2, 3, "db"));
  gate g;
  occupancy occ;
  std::vector<join_handle<int>> held;
  for (int i = 0; i < 5; ++i) held.push_back(rt.spawn(gated_call(c, g, occ, i)));
  REQUIRE(eventually_within([&] { return settled(c.stats(), 2, 3); }));

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
  gate g;
  occupancy occ;
  auto first = rt.spawn(gated_call(c, g, occ, 1));
  REQUIRE(eventually_within([&] { return settled(c.stats(), 1, 0); }));
  auto second = rt.spawn(gated_call(c, g, occ, 2));
  CHECK(outcome_of(second) == "too_many_tasks: Work in progress 2 exceeds 1 jobs in coordinator");
  g.open();
  CHECK(first.join_blocking() == 1);
}

TEST_CASE("cancelling a queued job removes it at once: it never runs and its place is free") {
  runtime rt(loops(2));
  coordinator c(limits(1, 1));
  gate g;
  occupancy occ;
  auto running = rt.spawn(gated_call(c, g, occ, 1));
  REQUIRE(eventually_within([&] { return settled(c.stats(), 1, 0); }));
  auto queued = rt.spawn(gated_call(c, g, occ, 2));
  REQUIRE(eventually_within([&] { return settled(c.stats(), 1, 1); }));

  queued.cancel();
  // While the running job still holds its slot.
  CHECK(outcome_of(queued) == "cancelled");
  auto s = c.stats();
  CHECK(settled(s, 1, 0));
  CHECK(s.withdrawn == 1);
  // The place it held takes a new arrival, which would otherwise be refused.
  auto next = rt.spawn(gated_call(c, g, occ, 3));
  REQUIRE(eventually_within([&] { return settled(c.stats(), 1, 1); }));
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
  REQUIRE(eventually_within([&] { return never::parked == 1; }));
  gate g;
  g.open();
  occupancy occ;
  auto second = rt.spawn(gated_call(c, g, occ, 2));
  REQUIRE(eventually_within([&] { return settled(c.stats(), 1, 1); }));

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
  gate g;
  auto thrower = [](coordinator& co, gate& gt) -> task<int> {
    auto job = [&gt]() -> task<int> {
      co_await gt.wait();
      throw job_error("job failed");
    };
    co_return co_await co.execute(std::move(job));
  };
  auto failing = rt.spawn(thrower(c, g));
  REQUIRE(eventually_within([&] { return settled(c.stats(), 1, 0); }));
  occupancy occ;
  std::vector<join_handle<int>> after;
  for (int i = 0; i < 3; ++i) after.push_back(rt.spawn(gated_call(c, g, occ, i)));
  REQUIRE(eventually_within([&] { return settled(c.stats(), 1, 3); }));
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
  REQUIRE(eventually_within([&] { return computing.load(); }));
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

// ---- work in progress, over random mixes -------------------------------------

namespace {

enum class fate { succeed, fail, cancel };

task<void> open_gate(gate& g) {
  g.open();
  co_return;
}

// Spawns `n` callers built by make(i), then waits until all of them have
// arrived. On one loop, never-run tasks start in the order they were spawned,
// so a marker spawned last runs once every caller has reached the
// coordinator (running, queued or refused). On two loops a peer may steal a
// caller and start it after the marker: only one loop's order is promised.
template <class Make>
task<std::vector<join_handle<int>>> arrive(std::size_t n, Make make) {
  std::vector<join_handle<int>> hs;
  for (std::size_t i = 0; i < n; ++i) hs.push_back(spawn(make(i)));
  gate arrived;
  auto marker = spawn(open_gate(arrived));
  co_await arrived.wait();
  co_await marker;
  co_return hs;
}

task<int> fated_call(coordinator& c, fate f) {
  auto job = [f]() -> task<int> {
    if (f == fate::cancel) co_await never{};  // ends only by being cancelled
    co_await yield();
    if (f == fate::fail) throw job_error("planned");
    co_return 1;
  };
  co_return co_await c.execute(std::move(job));
}

task<int> parked_call(coordinator& c) {
  co_await c.execute([]() -> task<void> { co_await never{}; });
  co_return 0;
}

struct mix_result {
  std::size_t admitted = 0, refused = 0, mismatched = 0;
};

// One round: callers with random fates arrive; those fated to be cancelled
// are cancelled in a random order, with random yields in between (so that
// other jobs finish, hand slots over and grant waiters meanwhile). Each
// caller must end as its fate says, or be refused.
task<mix_result> mix_round(coordinator& c, std::vector<fate> fates, std::vector<std::size_t> cancel_order,
                           std::vector<int> yields_between) {
  auto hs = co_await arrive(fates.size(), [&](std::size_t i) { return fated_call(c, fates[i]); });
  std::size_t k = 0;
  for (std::size_t i : cancel_order) {
    for (int y = 0; y < yields_between[k % yields_between.size()]; ++y) co_await yield();
    ++k;
    if (fates[i] == fate::cancel) hs[i].cancel();
  }
  mix_result r;
  for (std::size_t i = 0; i < hs.size(); ++i) {
    std::string how;
    try {
      co_await hs[i];
      how = "value";
    } catch (const too_many_tasks&) {
      how = "refused";
    } catch (const job_error&) {
      how = "error";
    } catch (const cancelled&) {
      how = "cancelled";
    }
    const char* expected = fates[i] == fate::succeed ? "value" : fates[i] == fate::fail ? "error" : "cancelled";
    if (how == "refused") ++r.refused;
    else {
      ++r.admitted;
      if (how != expected) {
        ++r.mismatched;
        MESSAGE("caller ", i, " ended ", how, ", expected ", std::string(expected));
      }
    }
  }
  co_return r;
}

// Fills `c` with exactly `limit` parked jobs and returns what the next
// arrival hears: "Work in progress limit+1 exceeds limit ..." proves that the
// work in progress was exactly zero before.
task<std::string> probe_empty(coordinator& c, std::size_t limit) {
  auto hs = co_await arrive(limit, [&](std::size_t) { return parked_call(c); });
  // On two loops the marker may overtake a caller a peer stole: wait until
  // all of them hold a slot or a queue entry, or the probe would queue
  // behind jobs that never end.
  auto all_in = [&] {
    auto s = c.stats();
    return s.running + s.queued == limit;
  };
  if (!co_await test::until(all_in)) co_return "the parked callers never all reached the coordinator";
  std::string heard = "admitted";
  try {
    co_await c.execute([]() -> task<void> { co_return; });
  } catch (const too_many_tasks& e) {
    heard = e.what();
  }
  for (auto& h : hs) h.cancel();
  for (auto& h : hs) {
    try {
      co_await h;
    } catch (const cancelled&) {
    }
  }
  co_return heard;
}

void run_mixes(unsigned loop_count, std::uint32_t seed, int rounds) {
  runtime rt(loops(loop_count));
  struct shape {
    std::size_t concurrency, queue;
  };
  const std::vector<shape> shapes{{1, 0}, {1, 2}, {2, 1}, {3, 4}};
  std::vector<std::unique_ptr<coordinator>> cs;
  for (std::size_t i = 0; i < shapes.size(); ++i)
    cs.push_back(std::make_unique<coordinator>(
        limits(shapes[i].concurrency, shapes[i].queue, "mix" + std::to_string(i))));

  std::mt19937 rng(seed);
  std::uint64_t admitted = 0, refused = 0;
  std::vector<std::uint64_t> admitted_in(cs.size()), refused_in(cs.size()), cancel_fated_in(cs.size());
  for (int round = 0; round < rounds; ++round) {
    const std::size_t which = rng() % cs.size();
    std::vector<fate> fates(1 + rng() % 9);
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < fates.size(); ++i) {
      fates[i] = static_cast<fate>(rng() % 3);
      order.push_back(i);
    }
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<int> yields(order.size() + 1);
    for (int& y : yields) y = static_cast<int>(rng() % 3);

    mix_result r = rt.block_on(mix_round(*cs[which], fates, order, yields));
    CHECK_MESSAGE(r.mismatched == 0, "seed ", seed, " round ", round);
    admitted_in[which] += r.admitted;
    cancel_fated_in[which] += static_cast<std::uint64_t>(std::count(fates.begin(), fates.end(), fate::cancel));
    refused_in[which] += r.refused;
    admitted += r.admitted;
    refused += r.refused;
    auto s = cs[which]->stats();
    REQUIRE_MESSAGE(settled(s, 0, 0), "seed ", seed, " round ", round);
  }
  for (std::size_t i = 0; i < cs.size(); ++i) {
    auto s = cs[i]->stats();
    if (loop_count == 1) {
      // Every caller arrived before any cancel: each one not refused was admitted.
      CHECK(s.completed + s.withdrawn == admitted_in[i]);
    } else {
      // On two loops a cancel may reach a caller before it reaches the
      // coordinator: it ends cancelled without having been admitted.
      CHECK(s.completed + s.withdrawn <= admitted_in[i]);
      CHECK(s.completed + s.withdrawn + cancel_fated_in[i] >= admitted_in[i]);
    }
    CHECK(s.rejected == refused_in[i]);
    const std::size_t limit = shapes[i].concurrency + shapes[i].queue;
    CHECK(rt.block_on(probe_empty(*cs[i], limit)) ==
          "Work in progress " + std::to_string(limit + 1) + " exceeds " + std::to_string(limit) + " jobs in mix" +
              std::to_string(i));
  }
  // Every way to end happened, many times over.
  CHECK(admitted > static_cast<std::uint64_t>(rounds));
  CHECK(refused > 0);
  std::uint64_t withdrawn = 0;
  for (auto& c : cs) withdrawn += c->stats().withdrawn;
  CHECK(withdrawn > 0);
}

}  // namespace

TEST_CASE("work in progress returns to zero after thousands of random mixes of success, throw, "
          "cancel while queued and cancel while running (one loop, deterministic per seed)") {
  run_mixes(1, 20240611u, 3000);
}

TEST_CASE("work in progress returns to zero after random mixes with callers and cancels on two loops") {
  run_mixes(2, 7u, 600);
}

TEST_CASE("three callers cancelled at once: the running job is cancelled, the two waiting are withdrawn unrun") {
  // The shape the random mixes are built from, pinned: on one loop, with
  // max_concurrency 1 and a queue of 2, the three callers are one running
  // and two queued when the cancels land.
  runtime rt(loops(1));
  coordinator c(limits(1, 2));
  mix_result r = rt.block_on(mix_round(c, {fate::cancel, fate::cancel, fate::cancel}, {2, 0, 1}, {0}));
  CHECK(r.mismatched == 0);
  CHECK(r.admitted == 3);
  auto s = c.stats();
  CHECK(s.withdrawn == 2);  // the two queued never ran
  CHECK(s.completed == 1);  // the running one ran and was cancelled
  CHECK(settled(s, 0, 0));
}

TEST_CASE("a caller cancelled after its waiting job was granted a slot, before it ran: the job never runs "
          "and the slot moves on") {
  // One loop, so the interleaving is fixed. A runs and yields; B and C wait;
  // the root yields too, so that A finishes and grants B just before the
  // root cancels B, while B's resumption is still queued. B must then hand
  // the slot to C without running its job. (Had the cancel landed first,
  // B would have been withdrawn from the queue: the outcome is the same.)
  runtime rt(loops(1));
  coordinator c(limits(1, 5));
  std::atomic<int> b_ran{0};
  auto scenario = [](coordinator& co, std::atomic<int>& b) -> task<std::string> {
    auto a_job = []() -> task<int> {
      co_await yield();
      co_return 1;
    };
    auto b_job = [&b]() -> task<int> {
      ++b;
      co_return 2;
    };
    auto call = [](coordinator& cc, auto job) -> task<int> { co_return co_await cc.execute(std::move(job)); };
    std::vector<join_handle<int>> hs;
    hs.push_back(spawn(call(co, a_job)));
    hs.push_back(spawn(call(co, b_job)));
    hs.push_back(spawn(call(co, []() -> task<int> { co_return 3; })));
    gate arrived;
    auto marker = spawn(open_gate(arrived));
    co_await arrived.wait();
    co_await yield();
    hs[1].cancel();
    std::string out;
    for (auto& h : hs) {
      try {
        out += std::to_string(co_await h);
      } catch (const cancelled&) {
        out += "c";
      }
    }
    co_await marker;
    co_return out;
  };
  CHECK(rt.block_on(scenario(c, b_ran)) == "1c3");
  CHECK(b_ran == 0);
  auto s = c.stats();
  CHECK(s.completed == 2);
  CHECK(s.withdrawn == 1);
  CHECK(settled(s, 0, 0));
}

TEST_CASE("a grant from another loop racing the cancel of the waiter it grants: "
          "exactly one wake, and the job never runs") {
  // B waits for the one slot A holds; A's finish (on whichever loop runs it)
  // grants B while another thread cancels B. Whichever wins, B is woken
  // once and stops: withdrawn from the queue, or granted and handing the
  // slot on unrun. 200 rounds, so both orders (and the one where the cancel
  // reaches B while the grant is on its way) come up.
  runtime rt(loops(2));
  for (int round = 0; round < 200; ++round) {
    coordinator c(limits(1, 5));
    gate a_gate;
    std::atomic<bool> b_ran{false};
    auto a_call = [](coordinator& co, gate& g) -> task<int> {
      auto job = [&g]() -> task<int> {
        co_await g.wait();
        co_return 1;
      };
      co_return co_await co.execute(std::move(job));
    };
    auto a = rt.spawn(a_call(c, a_gate));
    REQUIRE(eventually_within([&] { return settled(c.stats(), 1, 0); }));
    auto b_call = [](coordinator& co, std::atomic<bool>& ran) -> task<int> {
      co_return co_await co.execute([&ran]() -> task<int> {
        ran = true;
        co_return 2;
      });
    };
    auto b = rt.spawn(b_call(c, b_ran));
    REQUIRE(eventually_within([&] { return settled(c.stats(), 1, 1); }));
    std::atomic<bool> go{false};
    std::thread canceller([&] {
      while (!go.load()) std::this_thread::yield();
      b.cancel();
    });
    go = true;
    a_gate.open();
    canceller.join();
    CHECK(a.join_blocking() == 1);
    const std::string b_end = outcome_of(b);
    REQUIRE(eventually_within([&] { return settled(c.stats(), 0, 0); }));
    auto s = c.stats();
    if (b_ran) {
      // The grant won and B ran its job before the cancel came: too late to stop it.
      CHECK(b_end == "value");
      CHECK(s.completed == 2);
      CHECK(s.withdrawn == 0);
    } else {
      CHECK(b_end == "cancelled");
      CHECK(s.completed == 1);
      CHECK(s.withdrawn == 1);
    }
  }
}

// ---- blocking jobs -------------------------------------------------------------

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
  REQUIRE(eventually_within([&] { return settled(c.stats(), 2, 8) && occ.inside == 2; }));
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
  REQUIRE(eventually_within([&] { return started.load(); }));
  occupancy occ;
  gate g;
  g.open();
  auto next = rt.spawn(gated_call(c, g, occ, 5));
  REQUIRE(eventually_within([&] { return settled(c.stats(), 1, 1); }));
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
  gate g;
  occupancy occ;
  auto holder = rt.spawn(gated_call(c, g, occ, 1));
  REQUIRE(eventually_within([&] { return settled(c.stats(), 1, 0); }));
  std::atomic<bool> ran{false};
  auto caller = [](coordinator& co, std::atomic<bool>& r) -> task<void> {
    co_await co.execute([&r] { r = true; });
  };
  auto h = rt.spawn(caller(c, ran));
  REQUIRE(eventually_within([&] { return settled(c.stats(), 1, 1); }));
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
  REQUIRE(eventually_within([&] { return busy.load(); }));
  auto h = rt.spawn([](coordinator& co, std::atomic<bool>& r) -> task<void> {
    co_await co.execute([&r] { r = true; });
  }(c, ran));
  REQUIRE(eventually_within([&] { return rt.blocking().stats().queued == 1; }));
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

TEST_CASE("default coordinator options show: one job runs, fifty wait, the fifty-second is refused") {
  const coordinator_options defaults;
  CHECK(defaults.max_concurrency == 1);
  CHECK(defaults.max_queue == 50);
  runtime rt(loops(2));
  coordinator c;  // the defaults
  gate g;
  occupancy occ;
  std::vector<join_handle<int>> hs;
  for (int i = 0; i < 51; ++i) hs.push_back(rt.spawn(gated_call(c, g, occ, i)));
  REQUIRE(eventually_within([&] { return settled(c.stats(), 1, 50); }));
  auto refused = rt.spawn(gated_call(c, g, occ, 51));
  CHECK(outcome_of(refused) == "too_many_tasks: Work in progress 52 exceeds 51 jobs in coordinator");
  g.open();
  for (int i = 0; i < 51; ++i) CHECK(hs[i].join_blocking() == i);
  CHECK(occ.most == 1);
}

// ---- lifetime ------------------------------------------------------------------

TEST_CASE("a coordinator destroyed while detached jobs run and wait lets them finish") {
  runtime rt(loops(2));
  auto c = std::make_unique<coordinator>(limits(2, 5));
  gate g;
  occupancy occ;
  std::vector<join_handle<int>> hs;
  for (int i = 0; i < 6; ++i) hs.push_back(rt.spawn(gated_call(*c, g, occ, i)));
  REQUIRE(eventually_within([&] { return settled(c->stats(), 2, 4); }));
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
    REQUIRE(eventually_within([&] { return settled(c.stats(), 1, 4); }));
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

// ---- tenants -------------------------------------------------------------------

namespace {
task<int> tenant_gated_call(tenants& t, std::string name, gate& g, occupancy& occ, int v) {
  co_return co_await t.execute(name, gated_job(g, occ, v));
}
}  // namespace

TEST_CASE("a tenant at its limit is refused at once and does not hold up another tenant") {
  runtime rt(loops(2));
  tenants ts(limits(1, 1));
  gate g;
  occupancy occ;
  auto a1 = rt.spawn(tenant_gated_call(ts, "acme", g, occ, 1));
  auto a2 = rt.spawn(tenant_gated_call(ts, "acme", g, occ, 2));
  REQUIRE(eventually_within([&] {
    auto s = ts.stats("acme");
    return s && settled(*s, 1, 1);
  }));
  auto a3 = rt.spawn(tenant_gated_call(ts, "acme", g, occ, 3));
  CHECK(outcome_of(a3) == "too_many_tasks: Work in progress 3 exceeds 2 jobs in acme");
  // Another tenant runs to the end while acme is full and its gate shut.
  auto other = [](tenants& t) -> task<int> { co_return co_await t.execute("globex", []() -> task<int> { co_return 9; }); };
  CHECK(rt.block_on(other(ts)) == 9);
  CHECK(ts.size() == 1);
  g.open();
  CHECK(a1.join_blocking() == 1);
  CHECK(a2.join_blocking() == 2);
}

TEST_CASE("an idle tenant is removed: size returns to zero and a returning tenant starts afresh") {
  runtime rt(loops(2));
  tenants ts(limits(2, 5));
  CHECK(ts.size() == 0);
  gate g;
  occupancy occ;
  std::vector<join_handle<int>> hs;
  for (int i = 0; i < 4; ++i) hs.push_back(rt.spawn(tenant_gated_call(ts, i % 2 ? "odd" : "even", g, occ, i)));
  REQUIRE(eventually_within([&] { return ts.size() == 2 && occ.inside == 4; }));
  g.open();
  for (int i = 0; i < 4; ++i) CHECK(hs[i].join_blocking() == i);
  CHECK(ts.size() == 0);
  CHECK_FALSE(ts.stats("odd").has_value());
  CHECK(rt.block_on(ts.execute("odd", []() -> task<int> { co_return 1; })) == 1);
  CHECK(ts.size() == 0);
  // Rejections do not keep a tenant alive either.
  tenants tiny(limits(1, 0));
  gate shut;
  auto holder = rt.spawn(tenant_gated_call(tiny, "t", shut, occ, 1));
  REQUIRE(eventually_within([&] { return tiny.size() == 1 && occ.inside == 1; }));
  auto refused = rt.spawn(tenant_gated_call(tiny, "t", shut, occ, 2));
  CHECK(outcome_of(refused).rfind("too_many_tasks", 0) == 0);
  shut.open();
  CHECK(holder.join_blocking() == 1);
  CHECK(tiny.size() == 0);
}

TEST_CASE("a tenant's refusal names the tenant, prefixed by per_tenant.name when it is set") {
  runtime rt(loops(1));
  tenants ts(limits(1, 0, "api"));
  gate g;
  occupancy occ;
  auto holder = rt.spawn(tenant_gated_call(ts, "acme", g, occ, 1));
  REQUIRE(eventually_within([&] { return occ.inside == 1; }));
  auto refused = rt.spawn(tenant_gated_call(ts, "acme", g, occ, 2));
  CHECK(outcome_of(refused) == "too_many_tasks: Work in progress 2 exceeds 1 jobs in api/acme");
  g.open();
  CHECK(holder.join_blocking() == 1);
}

TEST_CASE("the tenant name is copied: the caller's string may be gone before the task starts") {
  runtime rt(loops(1));
  tenants ts(limits(1, 0));
  task<int> t;
  {
    std::string name = "a-tenant-name-longer-than-any-small-string-buffer";
    t = ts.execute(name, []() -> task<int> { co_return 3; });
    name.assign(name.size(), 'x');
  }
  CHECK(rt.block_on(std::move(t)) == 3);
  CHECK(ts.size() == 0);
}

TEST_CASE("tenants coming and going on two loops never lose a job, never exceed their limit, and all leave") {
  runtime rt(loops(2));
  constexpr int tenant_count = 5;
  tenants ts(limits(2, 1000));
  std::vector<occupancy> occ(tenant_count);
  std::atomic<int> done{0};
  auto caller = [](tenants& t, occupancy& o, std::atomic<int>& d, int tenant, int spin) -> task<void> {
    auto job = [&o, &d, spin]() -> task<void> {
      o.enter();
      for (int k = 0; k < spin; ++k) co_await yield();
      o.leave();
      ++d;
    };
    co_await t.execute("tenant-" + std::to_string(tenant), std::move(job));
  };
  std::mt19937 rng(99);
  int total = 0;
  for (int wave = 0; wave < 200; ++wave) {
    // Small waves: tenants often go idle, are removed, and come back.
    std::vector<join_handle<void>> hs;
    const int n = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < n; ++i) {
      const int tenant = static_cast<int>(rng() % tenant_count);
      hs.push_back(rt.spawn(caller(ts, occ[tenant], done, tenant, static_cast<int>(rng() % 3))));
    }
    for (auto& h : hs) h.join_blocking();
    total += n;
    REQUIRE(ts.size() == 0);
  }
  CHECK(done == total);
  for (auto& o : occ) CHECK(o.most <= 2);
}

namespace {
// Joins every handle from this thread: how many ended with a value, how many stopped.
struct endings {
  int values = 0, stopped = 0;
};
endings endings_of(std::vector<join_handle<int>>& hs) {
  endings e;
  for (auto& h : hs) {
    const std::string how = outcome_of(h);
    e.values += how == "value";
    e.stopped += how == "cancelled";
  }
  return e;
}
}  // namespace

TEST_CASE("tenants destroyed closes every tenant: queued jobs stop, running ones finish") {
  runtime rt(loops(2));
  auto ts = std::make_unique<tenants>(limits(1, 5));
  gate g;
  occupancy occ;
  std::vector<join_handle<int>> hs;
  for (int i = 0; i < 6; ++i) hs.push_back(rt.spawn(tenant_gated_call(*ts, i % 2 ? "x" : "y", g, occ, i)));
  REQUIRE(eventually_within([&] {
    auto x = ts->stats("x"), y = ts->stats("y");
    return x && y && settled(*x, 1, 2) && settled(*y, 1, 2);
  }));
  ts.reset();
  g.open();
  // One job of each tenant was running and finishes; the other four were
  // queued and their callers stopped (which ones depends on arrival order).
  const endings e = endings_of(hs);
  CHECK(e.values == 2);
  CHECK(e.stopped == 4);
  CHECK(occ.entered == 2);
}

TEST_CASE("close refuses new work naming the coordinator, stops queued jobs, lets the running one finish") {
  runtime rt(loops(2));
  coordinator c(limits(1, 5, "ledger"));
  gate g;
  occupancy occ;
  // Spawned from this thread, they reach the coordinator in no fixed order:
  // one runs (held at the gate), two wait.
  std::vector<join_handle<int>> hs;
  for (int i = 0; i < 3; ++i) hs.push_back(rt.spawn(gated_call(c, g, occ, i)));
  REQUIRE(eventually_within([&] { return settled(c.stats(), 1, 2); }));
  c.close();
  // The two waiting jobs' callers stop at once, with the gate still closed.
  REQUIRE(eventually_within([&] { return settled(c.stats(), 1, 0); }));
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

}  // TEST_SUITE
