// tests/core/test_scheduling.cpp — work stealing: no runnable task waits behind a
// busy loop while another loop is idle.
//
// "Busy" here is a task that spins without suspending. The tests make one
// loop busy on purpose (a hog pinned by construction: two hogs fill both
// loops, then the test releases the one on the other loop) and check that
// what should move does: new tasks, woken tasks, yielded tasks and due
// timers. Every wait is bounded by test::generous and fails with a message.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <sys/syscall.h>
#include <unistd.h>

#include <weft/cancel.hpp>
#include <weft/join_handle.hpp>
#include <weft/offload.hpp>
#include <weft/runtime.hpp>
#include <weft/task.hpp>
#include <weft/time.hpp>
#include <weft/yield.hpp>

#include "counted.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using namespace weft;
using test::eventually;
using test::loops;
using test::wait_for;

namespace {

using steady = std::chrono::steady_clock;

// The calling thread, asked of the kernel each time. Not
// std::this_thread::get_id(): clang 14 may keep the thread pointer it read
// before a co_await and reuse it after, when the task has moved to another
// thread (pthread_self is an inlined read of %fs), so a task that migrated
// would seem not to have moved.
long thread_tag() { return ::syscall(SYS_gettid); }

// A task that spins on its loop thread, never suspending, until released (or
// until test::generous has passed, so a broken scheduler fails rather than
// hangs).
struct hog {
  std::atomic<bool> started{false}, release{false};
  std::atomic<long> thread{};
  static task<void> run(hog& h) {
    h.thread = thread_tag();
    h.started = true;
    const auto give_up = steady::now() + test::generous;
    while (!h.release.load() && steady::now() < give_up) std::this_thread::yield();
    co_return;
  }
};

// Occupies both loops of a 2-loop runtime with a hog each, then frees the
// one that is not on `keep_busy`'s thread: afterwards exactly that loop is
// busy. Returns the hog left spinning.
hog* busy_only(runtime& rt, hog (&hogs)[2], std::vector<join_handle<void>>& hs, long keep_busy) {
  hs.push_back(rt.spawn(hog::run(hogs[0])));
  hs.push_back(rt.spawn(hog::run(hogs[1])));
  wait_for([&] { return hogs[0].started && hogs[1].started; }, "both loops taken by a hog each");
  hog* stay = hogs[0].thread.load() == keep_busy ? &hogs[0] : &hogs[1];
  hog* go = stay == &hogs[0] ? &hogs[1] : &hogs[0];
  REQUIRE(stay->thread.load() == keep_busy);
  go->release = true;
  return stay;
}

}  // namespace

TEST_SUITE("scheduling") {

TEST_CASE("a burst of compute tasks spawned by one task runs on every loop at once") {
  runtime rt(loops(2));
  std::atomic<int> running{0}, most{0};
  auto compute = [](std::atomic<int>& now, std::atomic<int>& peak) -> task<void> {
    int n = ++now;
    for (int seen = peak.load(); n > seen && !peak.compare_exchange_weak(seen, n);) {
    }
    // Spin without suspending until both loops are seen busy at once (or
    // give up: the check below then fails).
    const auto give_up = steady::now() + test::generous;
    while (peak.load() < 2 && steady::now() < give_up) std::this_thread::yield();
    --now;
    co_return;
  };
  auto parent = [&]() -> task<void> {
    std::vector<join_handle<void>> hs;
    for (int i = 0; i < 4; ++i) hs.push_back(spawn(compute(running, most)));
    for (auto& h : hs) co_await h;
  };
  rt.block_on(parent());
  CHECK(most.load() == 2);
}

TEST_CASE("a child that busy-waits for its parent's flag ends: the parent moves to the idle loop") {
  runtime rt(loops(2));
  auto scenario = []() -> task<bool> {
    std::atomic<bool> started{false}, flag{false};
    auto child = [](std::atomic<bool>& s, std::atomic<bool>& f) -> task<bool> {
      s = true;
      const auto give_up = steady::now() + test::generous;
      while (!f.load()) {
        if (steady::now() > give_up) co_return false;
        std::this_thread::yield();
      }
      co_return true;
    };
    auto h = spawn(child(started, flag));
    if (!co_await test::until([&] { return started.load(); })) co_return false;
    flag = true;
    co_return co_await h;
  };
  CHECK(rt.block_on(scenario()));
}

TEST_CASE("a child that busy-waits for its parent's cancel() ends, and stops at its next suspension point") {
  runtime rt(loops(2));
  auto scenario = []() -> task<int> {
    std::atomic<bool> started{false};
    std::atomic<int> saw{0};  // 1: saw the cancel; 2: gave up
    auto child = [](std::atomic<bool>& s, std::atomic<int>& out) -> task<void> {
      s = true;
      const auto give_up = steady::now() + test::generous;
      while (!this_task::is_cancelled()) {
        if (steady::now() > give_up) {
          out = 2;
          co_return;
        }
        std::this_thread::yield();
      }
      out = 1;
      co_await yield();  // a cancellation point: the child stops here
      out = 3;
    };
    auto h = spawn(child(started, saw));
    if (!co_await test::until([&] { return started.load(); })) co_return -1;
    h.cancel();
    auto o = co_await h.outcome();
    co_return o.stopped() ? saw.load() : 10 + saw.load();
  };
  CHECK(rt.block_on(scenario()) == 1);
}

TEST_CASE("a task woken from another thread while its loop is busy runs on the idle loop") {
  runtime rt(loops(2));
  std::atomic<bool> parked{false}, job_may_end{false};
  std::atomic<long> before{}, after{};
  auto sleeper = [&]() -> task<void> {
    before = thread_tag();
    parked = true;
    // Woken by a pool thread: the completion is queued on this loop, which
    // is busy by then.
    co_await offload([&] {
      while (!job_may_end.load()) std::this_thread::sleep_for(100us);
    });
    after = thread_tag();
  };
  auto s = rt.spawn(sleeper());
  wait_for([&] { return parked.load(); }, "the task reached its offload");
  hog hogs[2];
  std::vector<join_handle<void>> hs;
  hog* busy = busy_only(rt, hogs, hs, before.load());
  job_may_end = true;
  const bool moved = eventually([&] { return after.load() != 0L; });
  busy->release = true;
  for (auto& h : hs) h.join_blocking();
  REQUIRE_MESSAGE(moved, "the woken task waited for its busy loop");
  CHECK(after.load() != before.load());
  s.join_blocking();
}

TEST_CASE("a task woken by a task on another loop while its own loop is busy runs there") {
  runtime rt(loops(2));
  std::atomic<bool> waiting{false};
  std::atomic<long> before{}, after{};
  auto gate_task = []() -> task<int> {
    co_await sleep_for(20ms);
    co_return 7;
  };
  auto waiter = [&](join_handle<int> g) -> task<int> {
    before = thread_tag();
    waiting = true;
    int v = co_await g;
    after = thread_tag();
    co_return v;
  };
  hog hogs[2];
  std::vector<join_handle<void>> hs;
  auto w = rt.spawn(waiter(rt.spawn(gate_task())));
  wait_for([&] { return waiting.load(); }, "the waiter parked on its join");
  hog* busy = busy_only(rt, hogs, hs, before.load());
  const bool moved = eventually([&] { return after.load() != 0L; });
  busy->release = true;
  for (auto& h : hs) h.join_blocking();
  REQUIRE_MESSAGE(moved, "the woken task waited for its busy loop");
  CHECK(after.load() != before.load());
  CHECK(w.join_blocking() == 7);
}

TEST_CASE("due timers of a busy loop fire on the idle loop, and never early") {
  runtime rt(loops(2));
  std::atomic<bool> armed{false};
  std::atomic<long> before{}, after{};
  std::atomic<long long> slept_us{0};
  auto sleeper = [&]() -> task<void> {
    before = thread_tag();
    // Armed on this loop's wheel; the hogs start only after it is armed.
    const auto t0 = steady::now();
    armed = true;
    co_await sleep_for(100ms);
    slept_us = std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - t0).count();
    after = thread_tag();
  };
  auto s = rt.spawn(sleeper());
  wait_for([&] { return armed.load(); }, "the sleeper armed its timer");
  hog hogs[2];
  std::vector<join_handle<void>> hs;
  hog* busy = busy_only(rt, hogs, hs, before.load());
  const bool fired = eventually([&] { return after.load() != 0L; });
  const bool still_busy = !busy->release.load();
  busy->release = true;
  for (auto& h : hs) h.join_blocking();
  s.join_blocking();
  REQUIRE_MESSAGE(fired, "the sleeper's timer waited for its busy loop");
  CHECK(still_busy);
  CHECK(after.load() != before.load());
  CHECK(slept_us.load() >= 100'000);
}

TEST_CASE("scheduled runs due at the same time start in submission order while their loop is busy") {
  runtime rt(loops(2));
  // Every job's timer is on the first loop's wheel; learn that loop's thread.
  std::atomic<long> first_loop{};
  rt.schedule_at(clock::now(), [&] { first_loop = thread_tag(); });
  wait_for([&] { return first_loop.load() != 0L; }, "a job due now ran");
  std::mutex mu;
  std::vector<int> order;
  std::vector<long> where;
  const auto at = clock::now() + 150ms;
  for (int i = 0; i < 16; ++i)
    rt.schedule_at(at, [&, i] {
      std::lock_guard<std::mutex> g(mu);
      order.push_back(i);
      where.push_back(thread_tag());
    });
  hog hogs[2];
  std::vector<join_handle<void>> hs;
  hog* busy = busy_only(rt, hogs, hs, first_loop.load());
  const bool ran = eventually([&] {
    std::lock_guard<std::mutex> g(mu);
    return order.size() == 16;
  });
  busy->release = true;
  for (auto& h : hs) h.join_blocking();
  REQUIRE_MESSAGE(ran, "the scheduled runs waited for their busy loop");
  std::vector<int> want(16);
  for (int i = 0; i < 16; ++i) want[i] = i;
  CHECK(order == want);
  for (auto t : where) CHECK(t != first_loop.load());
}

TEST_CASE("new tasks start while hundreds of tasks keep yielding: none starves") {
  runtime rt(loops(2));
  auto scenario = []() -> task<bool> {
    std::atomic<bool> stop{false};
    std::atomic<int> started{0};
    auto yielder = [](std::atomic<bool>& s) -> task<void> {
      const auto give_up = steady::now() + test::generous;
      while (!s.load() && steady::now() < give_up) co_await yield();
    };
    auto newcomer = [](std::atomic<int>& n) -> task<void> {
      ++n;
      co_return;
    };
    std::vector<join_handle<void>> ys, ns;
    for (int i = 0; i < 256; ++i) ys.push_back(spawn(yielder(stop)));
    co_await yield();
    for (int i = 0; i < 2000; ++i) ns.push_back(spawn(newcomer(started)));
    const bool all = co_await test::until([&] { return started.load() == 2000; });
    stop = true;
    for (auto& h : ys) co_await h;
    for (auto& h : ns) co_await h;
    co_return all;
  };
  CHECK(rt.block_on(scenario()));
}

TEST_CASE("spawn storms while loops steal from each other: every task runs once and the runtime drains") {
  runtime rt(loops(2));
  auto storm = []() -> task<long> {
    std::vector<join_handle<int>> hs;
    hs.reserve(100'000);
    auto one = [](int i) -> task<int> { co_return i % 7; };
    for (int i = 0; i < 100'000; ++i) hs.push_back(spawn(one(i)));
    long sum = 0;
    for (auto& h : hs) sum += co_await h;
    co_return sum;
  };
  long want = 0;
  for (int i = 0; i < 100'000; ++i) want += i % 7;
  for (int round = 0; round < 3; ++round) CHECK(rt.block_on(storm()) == want);
  CHECK(eventually([&] { return rt.stats().live_tasks == 0; }));
}

TEST_CASE("tasks migrating while cancelled from plain threads and dropped: every frame destroyed once") {
  counted::reset();
  runtime rt(loops(2));
  std::atomic<long> moves{0};
  auto mover = [](std::atomic<long>& m, int hops) -> task<int> {
    counted in_frame;
    auto at = thread_tag();
    for (int i = 0; i < hops; ++i) {
      co_await yield();
      if (thread_tag() != at) {
        ++m;
        at = thread_tag();
      }
    }
    co_return in_frame.id;
  };
  constexpr int rounds = 10'000, batch = 100;
  std::mt19937 rng(12345);
  for (int done = 0; done < rounds; done += batch) {
    std::vector<join_handle<int>> hs;
    for (int i = 0; i < batch; ++i) hs.push_back(rt.spawn(mover(moves, 1 + static_cast<int>(rng() % 40))));
    // Cancel some from a plain thread while they hop; drop some handles.
    std::thread canceller([&hs, seed = rng()] {
      std::mt19937 r(seed);
      for (auto& h : hs)
        if (r() % 2 == 0) h.cancel();
    });
    canceller.join();
    for (int i = 0; i < batch; ++i) {
      if (rng() % 4 == 0) {
        hs[i] = join_handle<int>();  // detach: the task runs or stops on its own
        continue;
      }
      try {
        hs[i].join_blocking();
      } catch (const cancelled&) {
      }
    }
  }
  REQUIRE(eventually([&] { return rt.stats().live_tasks == 0; }));
  CHECK(counted::alive() == 0);
  CHECK(counted::constructions() == counted::destructions());
  MESSAGE("tasks moved between loops ", moves.load(), " times");
  CHECK(moves.load() > 0);
}

TEST_CASE("an idle runtime sleeps: no loop turns while nothing is runnable or due") {
  runtime rt(loops(2));
  rt.block_on([]() -> task<void> { co_return; }());
  // Both loops go to sleep in the kernel; their CPU time stops growing.
  std::this_thread::sleep_for(50ms);
  timespec a{}, b{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
  std::this_thread::sleep_for(300ms);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
  const double used_ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
  MESSAGE("CPU used by an idle 2-loop runtime in 300 ms: ", used_ms, " ms");
  CHECK(used_ms < 30.0);  // generous: idle is ~0; a spinning loop would use ~300
}

}  // TEST_SUITE
