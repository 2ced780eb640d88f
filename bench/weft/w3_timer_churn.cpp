// bench/weft/w3_timer_churn.cpp — W3 of BENCHMARKS.md on weft: spawn M tasks
// that each sleep uniform in [1 s, 60 s], cancel every one through its join
// handle and join them all; none may fire (so a phase that lets a task's
// arm-to-cancel gap exceed a second fails its check). ns_per_op = wall of spawn+arm+cancel+join / M. As on the Asio
// side, a task cancelled before it ever ran never arms its timer; `armed`
// reports how many did. Joins use join_handle::outcome(): a cancelled task
// stops without an exception, and its join throws none either.
// arm_cancel_ns is the wheel alone: one arm and one cancel of a timer with M
// others armed, no task. when_any_loser_ns: when_any over 10,000 children
// parked on long sleeps, one of which wins at once; the wall of the whole
// when_any / the 9,999 losers stopped.
#include <random>
#include <vector>

#include <weft/weft.hpp>

#include "../common.hpp"
#include "time/timer_wheel.hpp"

namespace {
std::atomic<std::size_t> armed{0}, fired{0};

weft::task<void> sleeper(std::chrono::milliseconds d) {
  armed.fetch_add(1, std::memory_order_relaxed);
  co_await weft::sleep_for(d);
  fired.fetch_add(1, std::memory_order_relaxed);
}

weft::task<int> sleep_then(std::chrono::milliseconds d, int v) {
  co_await weft::sleep_for(d);
  co_return v;
}

// when_any over `n` children: child 0 wins at once, the others are parked on
// an hour's sleep and must be stopped before when_any returns.
double when_any_loser_ns(weft::runtime& rt, std::size_t n) {
  return rt.block_on([](std::size_t count) -> weft::task<double> {
    std::vector<weft::task<int>> ts;
    ts.reserve(count);
    ts.push_back(sleep_then(std::chrono::milliseconds(0), 7));
    for (std::size_t i = 1; i < count; ++i) ts.push_back(sleep_then(std::chrono::hours(1), 0));
    const std::int64_t t0 = bench::now_ns();
    auto [index, value] = co_await weft::when_any(std::move(ts));
    const std::int64_t wall = bench::now_ns() - t0;
    if (index != 0 || value != 7) bench::fail("weft", "W3", "when_any: the wrong child won");
    co_return static_cast<double>(wall) / static_cast<double>(count - 1);
  }(n));
}

double wheel_arm_cancel_ns(std::size_t background) {
  using weft::detail::timer_node;
  const std::int64_t origin = bench::now_ns();
  weft::detail::timer_wheel wheel(std::chrono::milliseconds(1), origin);
  std::mt19937_64 gen(42);
  std::uniform_int_distribution<std::int64_t> span(1'000'000'000, 60'000'000'000);
  std::vector<timer_node> others(background);
  for (auto& n : others) wheel.insert(&n, origin + span(gen));
  constexpr int ops = 2'000'000;
  std::vector<std::int64_t> deadlines(1024);
  for (auto& d : deadlines) d = origin + span(gen);
  timer_node t;
  const std::int64_t t0 = bench::now_ns();
  for (int i = 0; i < ops; ++i) {
    wheel.insert(&t, deadlines[static_cast<std::size_t>(i) & 1023]);
    wheel.remove(&t);
  }
  const double ns = static_cast<double>(bench::now_ns() - t0) / ops;
  if (wheel.size() != background) bench::fail("weft", "W3", "the wheel lost or kept a timer");
  for (auto& n : others) wheel.remove(&n);
  return ns;
}
}  // namespace

int main(int argc, char** argv) {
  const std::size_t m = bench::parse_n(argc, argv, 1'000'000);
  std::int64_t phase_ns = 0;
  double loser_ns = 0;
  {
    weft::runtime_options o;
    o.loops = 2;
    weft::runtime rt(o);
    phase_ns = rt.block_on([](std::size_t count) -> weft::task<std::int64_t> {
      std::mt19937 gen(42);
      std::uniform_int_distribution<int> ms(1'000, 60'000);
      std::vector<weft::join_handle<void>> hs;
      hs.reserve(count);
      const std::int64_t t0 = bench::now_ns();
      for (std::size_t i = 0; i < count; ++i) hs.push_back(weft::spawn(sleeper(std::chrono::milliseconds(ms(gen)))));
      for (auto& h : hs) h.cancel();
      std::size_t cancelled = 0;
      for (auto& h : hs) {
        weft::outcome<void> o = co_await h.outcome();  // a stopped task joins without a throw
        if (o.stopped()) ++cancelled;
      }
      const std::int64_t wall = bench::now_ns() - t0;
      if (cancelled != count) bench::fail("weft", "W3", std::to_string(count - cancelled) + " sleepers were not cancelled");
      co_return wall;
    }(m));
    loser_ns = when_any_loser_ns(rt, 10'000);
  }
  if (fired.load() != 0) bench::fail("weft", "W3", std::to_string(fired.load()) + " timers fired");
  const long rss = bench::peak_rss_kb();
  bench::json_line("weft", "W3")
      .num("ns_per_op", static_cast<double>(phase_ns) / static_cast<double>(m))
      .num("armed", static_cast<double>(armed.load()))
      .num("rss_kb", static_cast<double>(rss))
      .num("arm_cancel_ns", wheel_arm_cancel_ns(1'000))
      .num("arm_cancel_ns_10m", wheel_arm_cancel_ns(m >= 1'000'000 ? 10'000'000 : 10'000))
      .num("when_any_loser_ns", loser_ns)
      .print();
}
