// tests/time/test_time.cpp — time end to end on a real runtime: sleep, timeout,
// interval and the Spring-style scheduler. The wheel's own arithmetic and
// ordering are tested by hand-driven time in test_timer_wheel.cpp; here the
// lower bounds are exact (never early) and the upper bounds generous, because
// the machines are shared and noisy.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include <weft/weft.hpp>

#include "stop_probe.hpp"
#include "support.hpp"

using namespace weft;
using test::eventually;
using test::finishes_cancelled;
using test::generous;
using test::loops;
using namespace std::chrono_literals;

TEST_CASE("sleeps never wake before their deadline") {
  runtime rt(loops(2));
  std::atomic<int> early{0};
  rt.block_on([](std::atomic<int>& e) -> task<void> {
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> us(0, 20'000);
    std::vector<join_handle<void>> hs;
    for (int i = 0; i < 2000; ++i) {
      hs.push_back(spawn([](std::chrono::microseconds d, std::atomic<int>& ee) -> task<void> {
        const auto due = clock::now() + d;
        co_await sleep_until(due);
        if (clock::now() < due) ++ee;
      }(std::chrono::microseconds(us(rng)), e)));
    }
    for (auto& h : hs) co_await h;
  }(early));
  CHECK(early == 0);
}

TEST_CASE("a zero, negative or past sleep resumes at once and is still a cancellation point") {
  runtime rt(loops(1));
  rt.block_on([]() -> task<void> {
    co_await sleep_for(0ns);
    co_await sleep_for(-5s);
    co_await sleep_until(clock::now() - 1h);
    co_await sleep_until(clock::time_point::min());
  }());
  auto h = rt.spawn([]() -> task<void> {
    const auto give_up = clock::now() + test::generous;
    while (!this_task::is_cancelled() && clock::now() < give_up) std::this_thread::yield();
    co_await sleep_for(0ns);  // a cancellation point though it does not wait: stops here
  }());
  h.cancel();
  CHECK_THROWS_AS(h.join_blocking(), cancelled);
}

TEST_CASE("cancelling a sleeper wakes it promptly and removes its timer") {
  runtime rt(loops(2));
  std::vector<join_handle<void>> hs;
  for (int i = 0; i < 100; ++i) hs.push_back(rt.spawn([]() -> task<void> { co_await sleep_for(1h); }()));
  CHECK(eventually([&] { return rt.stats().timers == 100; }));
  const auto t0 = clock::now();
  for (auto& h : hs) h.cancel();
  for (auto& h : hs) CHECK_THROWS_AS(h.join_blocking(), cancelled);
  CHECK(clock::now() - t0 < generous);
  CHECK(rt.stats().timers == 0);
}

TEST_CASE("a duration::max() sleep can be cancelled") {
  runtime rt(loops(1));
  auto h = rt.spawn([]() -> task<void> { co_await sleep_for(clock::duration::max()); }());
  CHECK(eventually([&] { return rt.stats().timers == 1; }));
  h.cancel();
  CHECK_THROWS_AS(h.join_blocking(), cancelled);
  auto u = rt.spawn([]() -> task<void> { co_await sleep_until(clock::time_point::max()); }());
  CHECK(eventually([&] { return rt.stats().timers == 1; }));
  u.cancel();
  CHECK_THROWS_AS(u.join_blocking(), cancelled);
}

TEST_CASE("timeout throws timed_out after the task stopped") {
  runtime rt(loops(2));
  std::atomic<bool> unwound{false};
  const auto t0 = clock::now();
  CHECK_THROWS_AS(rt.block_on(timeout(20ms, [](std::atomic<bool>& u) -> task<int> {
                    test::stop_mark stopped{u};
                    co_await sleep_for(1h);
                    stopped.pass();
                    co_return 1;
                  }(unwound))),
                  timed_out);
  CHECK(unwound);
  CHECK(clock::now() - t0 >= 20ms);
  CHECK(rt.stats().timers == 0);
}

TEST_CASE("timeout that does not fire yields the value and removes its timer at once") {
  runtime rt(loops(1));
  int v = rt.block_on([&]() -> task<int> {
    int r = co_await timeout(1h, []() -> task<int> {
      co_await sleep_for(1ms);
      co_return 5;
    }());
    CHECK(runtime::current()->stats().timers == 0);
    co_return r;
  }());
  CHECK(v == 5);
}

TEST_CASE("timeout passes the task's own exception through") {
  runtime rt(loops(1));
  CHECK_THROWS_WITH_AS(rt.block_on(timeout(1h, []() -> task<void> {
                         co_await sleep_for(1ms);
                         throw std::runtime_error("own");
                       }())),
                       "own", std::runtime_error);
}

TEST_CASE("nested timeouts: the inner one fires first, then the outer one") {
  runtime rt(loops(1));
  auto inner_first = rt.block_on([]() -> task<bool> {
    try {
      co_await timeout(1h, timeout(10ms, []() -> task<void> { co_await sleep_for(1h); }()));
    } catch (const timed_out&) {
      co_return true;
    }
    co_return false;
  }());
  CHECK(inner_first);
  auto outer = rt.block_on([]() -> task<bool> {
    try {
      co_await timeout(10ms, timeout(1h, []() -> task<void> { co_await sleep_for(1h); }()));
    } catch (const timed_out&) {
      co_return true;
    }
    co_return false;
  }());
  CHECK(outer);
  CHECK(rt.stats().timers == 0);
}

TEST_CASE("timeout of a task that ignores cancellation waits for its next suspension point") {
  runtime rt(loops(1));
  std::atomic<int> steps{0};
  const auto t0 = clock::now();
  CHECK_THROWS_AS(rt.block_on(timeout(5ms, [](std::atomic<int>& s) -> task<void> {
                    const auto until = clock::now() + 30ms;  // computes past the deadline
                    while (clock::now() < until) ++s;
                    co_await yield();  // first suspension point: cancelled here
                    s = -1;
                  }(steps))),
                  timed_out);
  CHECK(clock::now() - t0 >= 30ms);
  CHECK(steps > 0);
}

TEST_CASE("timeout of an empty task is invalid") {
  runtime rt(loops(1));
  task<int> empty;
  CHECK_THROWS_AS(static_cast<void>(timeout(1s, std::move(empty))), std::invalid_argument);
}

TEST_CASE("interval rejects a non-positive period") {
  CHECK_THROWS_AS(interval(0ns), std::invalid_argument);
  CHECK_THROWS_AS(interval(-1ms), std::invalid_argument);
}

TEST_CASE("a fixed-rate interval does not drift over 10,000 ticks") {
  interval iv(1ms);
  const auto first = iv.tick().deadline;
  clock::time_point due = first;
  for (int k = 0; k < 10'000; ++k) {
    // Each tick delivered a little late, as a loop would: the grid stays put.
    CHECK(iv.delivered(due, due + 300us) == due);
    due = iv.tick().deadline;
  }
  CHECK(due == first + 10'000 * 1ms);
}

TEST_CASE("missed_tick::burst delivers missed ticks back to back on the grid") {
  interval iv(10ms, missed_tick::burst);
  const auto t = iv.tick().deadline;
  iv.delivered(t, t + 35ms);  // the body overran by 3.5 periods
  CHECK(iv.tick().deadline == t + 10ms);
  iv.delivered(t + 10ms, t + 35ms);
  CHECK(iv.tick().deadline == t + 20ms);
  iv.delivered(t + 20ms, t + 35ms);
  CHECK(iv.tick().deadline == t + 30ms);
  iv.delivered(t + 30ms, t + 35ms);
  CHECK(iv.tick().deadline == t + 40ms);
}

TEST_CASE("missed_tick::delay restarts the grid from the late tick") {
  interval iv(10ms, missed_tick::delay);
  const auto t = iv.tick().deadline;
  iv.delivered(t, t + 1ms);
  CHECK(iv.tick().deadline == t + 10ms);
  iv.delivered(t + 10ms, t + 35ms);  // late by more than a period
  CHECK(iv.tick().deadline == t + 45ms);
}

TEST_CASE("missed_tick::skip continues at the next grid point after now") {
  interval iv(10ms, missed_tick::skip);
  const auto t = iv.tick().deadline;
  iv.delivered(t, t + 35ms);
  CHECK(iv.tick().deadline == t + 40ms);
}

TEST_CASE("each missed_tick mode with a deliberately slow body on a real loop") {
  runtime rt(loops(1));
  for (missed_tick mode : {missed_tick::burst, missed_tick::delay, missed_tick::skip}) {
    auto dues = rt.block_on([](missed_tick m) -> task<std::vector<clock::time_point>> {
      interval iv(5ms, m);
      std::vector<clock::time_point> got;
      for (int i = 0; i < 4; ++i) {
        got.push_back(co_await iv.tick());
        if (i == 0) std::this_thread::sleep_for(17ms);  // the slow body: misses ticks 1..3
      }
      co_return got;
    }(mode));
    REQUIRE(dues.size() == 4);
    const auto t = dues[0];
    if (mode == missed_tick::burst) {
      CHECK(dues[1] == t + 5ms);
      CHECK(dues[2] == t + 10ms);
      CHECK(dues[3] == t + 15ms);
    } else if (mode == missed_tick::delay) {
      CHECK(dues[1] == t + 5ms);          // delivered at once, late
      CHECK(dues[2] >= t + 17ms + 5ms);   // the grid restarted when it was delivered
      CHECK(dues[3] >= dues[2] + 5ms);    // exact when on time; later if this machine was slow
    } else {
      CHECK(dues[1] == t + 5ms);
      CHECK(dues[2] >= t + 20ms);         // next grid point after the late delivery
      CHECK((dues[2] - t) % 5ms == 0ns);  // still on the original grid
      CHECK(dues[3] > dues[2]);
      CHECK((dues[3] - t) % 5ms == 0ns);
    }
  }
}

TEST_CASE("interval ticks are never early on a real loop") {
  runtime rt(loops(1));
  int early = rt.block_on([]() -> task<int> {
    interval iv(2ms, missed_tick::burst, 3ms);
    int e = 0;
    for (int i = 0; i < 20; ++i) {
      auto due = co_await iv.tick();
      if (clock::now() < due) ++e;
    }
    co_return e;
  }());
  CHECK(early == 0);
}

TEST_CASE("schedule_at in the past runs at once, and equal due times run in submission order") {
  runtime rt(loops(2));
  std::mutex mu;
  std::vector<int> order;
  const auto past = clock::now() - 1s;
  const auto soon = clock::now() + 20ms;
  std::vector<scheduled_handle> hs;
  for (int i = 0; i < 50; ++i)
    hs.push_back(rt.schedule_at(i % 2 ? soon : past, [&, i] {
      std::lock_guard<std::mutex> g(mu);
      order.push_back(i);
    }));
  CHECK(eventually([&] {
    std::lock_guard<std::mutex> g(mu);
    return order.size() == 50;
  }));
  std::lock_guard<std::mutex> g(mu);
  std::vector<int> expected;
  for (int i = 0; i < 50; i += 2) expected.push_back(i);  // the past ones, first, in order
  for (int i = 1; i < 50; i += 2) expected.push_back(i);
  CHECK(order == expected);
}

TEST_CASE("schedule_at from a foreign thread while the loop sleeps on a far deadline fires on time") {
  runtime rt(loops(1));
  auto far = rt.schedule_at(clock::now() + 1h, [] {});
  std::this_thread::sleep_for(20ms);  // the loop is asleep with its timeout an hour away
  std::atomic<bool> ran{false};
  const auto due = clock::now() + 10ms;
  std::atomic<std::int64_t> ran_at{0};
  auto soon = rt.schedule_at(due, [&] {
    ran_at = clock::now().time_since_epoch().count();
    ran = true;
  });
  CHECK(eventually([&] { return ran.load(); }));
  CHECK(clock::time_point(clock::duration(ran_at.load())) >= due);
  CHECK(clock::time_point(clock::duration(ran_at.load())) < due + generous);
  far.cancel();
}

TEST_CASE("fixed-rate runs stay on the grid and a slow run's missed turns come back to back without overlap") {
  runtime rt(loops(2));
  std::mutex mu;
  std::vector<clock::time_point> starts;
  std::atomic<int> running{0}, overlaps{0};
  const auto grid = clock::now() + 5ms;  // no later than the job's own first due time
  auto h = rt.schedule_at_fixed_rate(
      [&] {
        if (running.fetch_add(1) != 0) ++overlaps;
        {
          std::lock_guard<std::mutex> g(mu);
          starts.push_back(clock::now());
          if (starts.size() == 2) std::this_thread::sleep_for(25ms);  // overruns ~2 turns
        }
        running.fetch_sub(1);
      },
      5ms, 10ms);
  CHECK(eventually([&] {
    std::lock_guard<std::mutex> g(mu);
    return starts.size() >= 6;
  }));
  h.cancel();
  std::lock_guard<std::mutex> g(mu);
  CHECK(overlaps == 0);
  for (std::size_t k = 0; k < 6; ++k) CHECK(starts[k] >= grid + k * 10ms);  // never before its turn
  // The overrun run (k = 1) pushed turns 2 and 3 late; they ran back to back
  // and the grid, not the delay, decided turn 4.
  CHECK(starts[2] >= starts[1] + 25ms);
  CHECK(starts[4] < starts[1] + 25ms + generous);
}

TEST_CASE("fixed-delay runs are spaced by the delay after each run ends") {
  runtime rt(loops(1));
  std::mutex mu;
  std::vector<std::pair<clock::time_point, clock::time_point>> runs;
  auto h = rt.schedule_with_fixed_delay(
      [&] {
        auto s = clock::now();
        std::this_thread::sleep_for(3ms);
        std::lock_guard<std::mutex> g(mu);
        runs.emplace_back(s, clock::now());
      },
      0ms, 5ms);
  CHECK(eventually([&] {
    std::lock_guard<std::mutex> g(mu);
    return runs.size() >= 4;
  }));
  h.cancel();
  std::lock_guard<std::mutex> g(mu);
  for (std::size_t k = 1; k < runs.size(); ++k) CHECK(runs[k].first - runs[k - 1].second >= 5ms);
}

TEST_CASE("a fixed-rate job whose first time is past runs now and then on the period, replaying nothing") {
  runtime rt(loops(1));
  for (clock::duration first : {clock::duration(-1s), clock::duration::min()}) {
    std::atomic<int> runs{0};
    const auto t0 = clock::now();
    auto h = rt.schedule_at_fixed_rate([&runs] { ++runs; }, first, first == clock::duration::min() ? 1h : 20ms);
    CHECK(eventually([&] { return runs.load() >= 1; }));
    std::this_thread::sleep_for(50ms);
    h.cancel();
    const auto elapsed = clock::now() - t0;
    // Now, then one per period since: a replay of the missed periods would
    // be 50+ runs for -1 s at 20 ms, and hundreds of thousands for min().
    const auto most = 2 + elapsed / 20ms;
    CHECK_MESSAGE(runs.load() <= most, "first ", first.count(), " ns: ", runs.load(), " runs");
  }
  std::atomic<int> delayed{0};
  auto d = rt.schedule_with_fixed_delay([&delayed] { ++delayed; }, -5s, 1h);
  CHECK(eventually([&] { return delayed.load() == 1; }));
  d.cancel();
}

TEST_CASE("a periodic job scheduled with report_and_continue reports each throw and keeps its schedule") {
  std::atomic<int> errors{0}, runs{0};
  runtime_options o = loops(1);
  o.on_error = [&](std::exception_ptr) { ++errors; };
  runtime rt(o);
  auto rate = rt.schedule_at_fixed_rate(
      [&] {
        if (++runs % 2 == 0) throw std::runtime_error("every other run fails");
      },
      0ms, 1ms, periodic_error::report_and_continue);
  CHECK(eventually([&] { return runs.load() >= 6; }));
  rate.cancel();
  CHECK(errors >= 2);
  std::atomic<int> delay_runs{0};
  auto delay = rt.schedule_with_fixed_delay(
      [&] {
        ++delay_runs;
        throw std::runtime_error("always fails");
      },
      0ms, 1ms, periodic_error::report_and_continue);
  CHECK(eventually([&] { return delay_runs.load() >= 3; }));
  delay.cancel();
}

TEST_CASE("a periodic job that throws stops, and the error goes to on_error") {
  std::atomic<int> errors{0}, runs{0};
  runtime_options o = loops(1);
  o.on_error = [&](std::exception_ptr) { ++errors; };
  runtime rt(o);
  auto h = rt.schedule_at_fixed_rate(
      [&] {
        if (++runs == 3) throw std::runtime_error("third run fails");
      },
      0ms, 1ms);
  CHECK(eventually([&] { return errors.load() == 1; }));
  std::this_thread::sleep_for(20ms);
  CHECK(runs == 3);
  CHECK(errors == 1);
}

TEST_CASE("a periodic job can cancel itself and schedule another from inside its run") {
  runtime rt(loops(2));
  std::atomic<int> first_runs{0};
  std::atomic<bool> second_ran{false};
  scheduled_handle self, next;
  std::mutex mu;
  {
    std::lock_guard<std::mutex> g(mu);
    self = rt.schedule_with_fixed_delay(
        [&]() -> task<void> {
          std::lock_guard<std::mutex> gg(mu);
          if (++first_runs == 2) {
            self.cancel();
            next = runtime::current()->schedule_at(clock::now(), [&] { second_ran = true; });
          }
          co_return;
        },
        0ms, 1ms);
  }
  CHECK(eventually([&] { return second_ran.load(); }));
  std::this_thread::sleep_for(20ms);
  CHECK(first_runs == 2);
  CHECK(self.cancelled());
}

TEST_CASE("schedule with a bad period or after shutdown is refused") {
  runtime rt(loops(1));
  CHECK_THROWS_AS(rt.schedule_at_fixed_rate([] {}, 0ms, 0ms), std::invalid_argument);
  CHECK_THROWS_AS(rt.schedule_with_fixed_delay([] {}, 0ms, -1ms), std::invalid_argument);
  rt.shutdown();
  CHECK_THROWS_AS(rt.schedule_at(clock::now(), [] {}), rejected_execution);
}

TEST_CASE("a scheduled_handle used after its runtime is gone is harmless") {
  scheduled_handle h;
  {
    runtime rt(loops(1));
    h = rt.schedule_at_fixed_rate([] {}, 1h, 1h);
  }
  CHECK_FALSE(h.cancelled());
  h.cancel();  // the runtime is gone: nothing to tell, nothing touched (ASan would see it)
  CHECK(h.cancelled());
  scheduled_handle copy = h;
  copy.cancel();
}

TEST_CASE("schedule and cancel from another thread racing shutdown neither leak nor crash") {
  for (int round = 0; round < 20; ++round) {
    std::vector<scheduled_handle> made;
    std::atomic<bool> refused{false};
    runtime rt(loops(2));
    std::thread other([&] {
      for (int i = 0; i < 100'000 && !refused; ++i) {
        try {
          made.push_back(rt.schedule_at(clock::now() + 1h, [] {}));
          if (i % 2) made.back().cancel();
        } catch (const rejected_execution&) {
          refused = true;
        }
      }
      for (auto& h : made) h.cancel();  // some after shutdown: harmless
    });
    std::this_thread::sleep_for(std::chrono::microseconds(200 * round));
    rt.shutdown();
    other.join();
  }
  // ASan's leak check proves every job and message was freed.
}

TEST_CASE("scheduled jobs still armed at shutdown are released") {
  std::atomic<int> ran{0};
  {
    runtime rt(loops(2));
    for (int i = 0; i < 100; ++i) rt.schedule_at(clock::now() + 1h, [&] { ++ran; });
    auto h = rt.schedule_at_fixed_rate([&] { ++ran; }, 1h, 1h);
    CHECK(eventually([&] { return rt.stats().timers == 101; }));
  }
  CHECK(ran == 0);  // ASan's leak check proves the jobs were freed
}

TEST_CASE("saturating_add clamps at the clock's ends, one step either side, for any duration unit") {
  using detail::saturating_add;
  using tp = clock::time_point;
  const auto ns1 = std::chrono::nanoseconds(1);
  CHECK(saturating_add(tp::max() - ns1, ns1) == tp::max());
  CHECK(saturating_add(tp::max() - ns1, 2 * ns1) == tp::max());
  CHECK(saturating_add(tp::max() - 2 * ns1, ns1) == tp::max() - ns1);
  CHECK(saturating_add(tp::max(), ns1) == tp::max());
  CHECK(saturating_add(tp::min() + ns1, -ns1) == tp::min());
  CHECK(saturating_add(tp::min() + ns1, -2 * ns1) == tp::min());
  CHECK(saturating_add(tp::min() + 2 * ns1, -ns1) == tp::min() + ns1);
  CHECK(saturating_add(tp::min(), -ns1) == tp::min());
  const tp now = clock::now();
  CHECK(saturating_add(now, clock::duration::zero()) == now);
  CHECK(saturating_add(now, clock::duration::max()) == tp::max());
  CHECK(saturating_add(now, clock::duration::min()) == now + clock::duration::min());  // now > 0: it fits
  // Coarse units whose max() does not fit in the clock's nanoseconds.
  CHECK(saturating_add(now, std::chrono::milliseconds::max()) == tp::max());
  CHECK(saturating_add(now, std::chrono::hours::min()) == now + clock::duration::min());  // clamped to ns first
  CHECK(saturating_add(tp::min() + ns1, std::chrono::hours::min()) == tp::min());
  CHECK(saturating_add(now, std::chrono::seconds(3)) == now + std::chrono::seconds(3));
  CHECK(saturating_add(tp::min(), clock::duration::max()) == tp::min() + clock::duration::max());
}
