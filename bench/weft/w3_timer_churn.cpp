// bench/weft/w3_timer_churn.cpp — W3 of BENCHMARKS.md on weft: spawn M tasks
// that each sleep uniform in [1 s, 60 s], cancel every one through its join
// handle and join them all; none may fire (so a phase that lets a task's
// arm-to-cancel gap exceed a second fails its check). ns_per_op = wall of spawn+arm+cancel+join / M. As on the Asio
// side, a task cancelled before it ever ran never arms its timer; `armed`
// reports how many did. arm_cancel_ns is the wheel alone: one arm and one
// cancel of a timer with M others armed, no task.
#include <random>
#include <vector>

#include <weft/weft.hpp>

#include "../common.hpp"
#include "timer_wheel.hpp"

namespace {
std::atomic<std::size_t> armed{0}, fired{0};

weft::task<void> sleeper(std::chrono::milliseconds d) {
  armed.fetch_add(1, std::memory_order_relaxed);
  co_await weft::sleep_for(d);
  fired.fetch_add(1, std::memory_order_relaxed);
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
        try {
          co_await h;
        } catch (const weft::cancelled&) {
          ++cancelled;
        }
      }
      const std::int64_t wall = bench::now_ns() - t0;
      if (cancelled != count) bench::fail("weft", "W3", std::to_string(count - cancelled) + " sleepers were not cancelled");
      co_return wall;
    }(m));
  }
  if (fired.load() != 0) bench::fail("weft", "W3", std::to_string(fired.load()) + " timers fired");
  const long rss = bench::peak_rss_kb();
  bench::json_line("weft", "W3")
      .num("ns_per_op", static_cast<double>(phase_ns) / static_cast<double>(m))
      .num("armed", static_cast<double>(armed.load()))
      .num("rss_kb", static_cast<double>(rss))
      .num("arm_cancel_ns", wheel_arm_cancel_ns(1'000))
      .num("arm_cancel_ns_10m", wheel_arm_cancel_ns(m >= 1'000'000 ? 10'000'000 : 10'000))
      .print();
}
