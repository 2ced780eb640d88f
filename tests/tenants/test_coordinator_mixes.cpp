// tests/tenants/test_coordinator_mixes.cpp — work in progress given back exactly
// once however a job ends (success, throw, cancelled while queued, cancelled
// while running), over thousands of random mixes of those ends, and the
// shapes the mixes are built from pinned one by one: cancels landing on a
// running and two queued jobs, a cancel landing after a grant, and a grant
// from another loop racing a cancel.
//
// The randomized mixes run on one loop, where a seed fixes the whole
// interleaving; a second run on two loops lets the grants and cancels meet
// across loops.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <weft/coordinator.hpp>
#include <weft/weft.hpp>

#include "coordinator_support.hpp"
#include "never.hpp"
#include "support.hpp"

using namespace weft;
using namespace std::chrono_literals;
using namespace test;  // support.hpp and coordinator_support.hpp

TEST_SUITE("coordinator") {

namespace {

enum class fate { succeed, fail, cancel };

task<void> open_gate(task_gate& g) {
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
  task_gate arrived;
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
  if (!co_await until(all_in)) co_return "the parked callers never all reached the coordinator";
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
    task_gate arrived;
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
    task_gate a_gate;
    std::atomic<bool> b_ran{false};
    auto a_call = [](coordinator& co, task_gate& g) -> task<int> {
      auto job = [&g]() -> task<int> {
        co_await g.wait();
        co_return 1;
      };
      co_return co_await co.execute(std::move(job));
    };
    auto a = rt.spawn(a_call(c, a_gate));
    REQUIRE(eventually([&] { return settled(c.stats(), 1, 0); }, hang_limit));
    auto b_call = [](coordinator& co, std::atomic<bool>& ran) -> task<int> {
      co_return co_await co.execute([&ran]() -> task<int> {
        ran = true;
        co_return 2;
      });
    };
    auto b = rt.spawn(b_call(c, b_ran));
    REQUIRE(eventually([&] { return settled(c.stats(), 1, 1); }, hang_limit));
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
    REQUIRE(eventually([&] { return settled(c.stats(), 0, 0); }, hang_limit));
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

}  // TEST_SUITE
