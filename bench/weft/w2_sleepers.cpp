// bench/weft/w2_sleepers.cpp — W2 of BENCHMARKS.md on weft: S tasks, task i
// sleeps d_i ms (uniform in [1, 100], seed 42) and records how late it woke,
// in µs on the monotonic clock. Waking early fails the check. Figures:
// p50/p99/max lateness, wall, peak RSS (and bytes per sleeper). The timer
// tick comes from WEFT_TIMER_TICK_US when set (the harness runs 1000 and 100).
#include <cstdlib>
#include <random>
#include <vector>

#include <weft/weft.hpp>

#include "../common.hpp"

int main(int argc, char** argv) {
  const std::size_t s = bench::parse_n(argc, argv, 100'000);
  weft::runtime_options o;
  o.loops = 2;
  if (const char* tick = std::getenv("WEFT_TIMER_TICK_US")) o.timer_tick = std::chrono::microseconds(std::atol(tick));
  const long rss_before = bench::peak_rss_kb();
  weft::runtime rt(o);
  std::vector<std::int64_t> lateness_us(s);
  const std::int64_t t0 = bench::now_ns();
  rt.block_on([](std::vector<std::int64_t>& late) -> weft::task<void> {
    std::mt19937 gen(42);
    std::uniform_int_distribution<int> ms(1, 100);
    std::vector<weft::join_handle<void>> hs;
    hs.reserve(late.size());
    for (std::size_t i = 0; i < late.size(); ++i) {
      hs.push_back(weft::spawn([](std::chrono::milliseconds d, std::int64_t& out) -> weft::task<void> {
        const auto due = weft::clock::now() + d;
        co_await weft::sleep_until(due);
        out = std::chrono::duration_cast<std::chrono::microseconds>(weft::clock::now() - due).count();
      }(std::chrono::milliseconds(ms(gen)), late[i])));
    }
    // Joining a run of already-finished handles never suspends; a root that
    // joined 100,000 of them in one go would hold its loop for milliseconds
    // and delay that loop's timers. Yielding now and then is what a long loop
    // on a cooperative runtime should do anyway.
    std::size_t joined = 0;
    for (auto& h : hs) {
      co_await h;
      if (++joined % 1024 == 0) co_await weft::yield();
    }
  }(lateness_us));
  const double wall_ms = static_cast<double>(bench::now_ns() - t0) / 1e6;
  for (std::int64_t l : lateness_us)
    if (l < 0) bench::fail("weft", "W2", "a sleeper woke " + std::to_string(-l) + " us early");
  const long rss = bench::peak_rss_kb();
  bench::json_line("weft", "W2")
      .num("tick_us", static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(o.timer_tick).count()))
      .num("p50_us", static_cast<double>(bench::percentile(lateness_us, 50)))
      .num("p99_us", static_cast<double>(bench::percentile(lateness_us, 99)))
      .num("max_us", static_cast<double>(bench::percentile(lateness_us, 100)))
      .num("wall_ms", wall_ms)
      .num("rss_kb", static_cast<double>(rss))
      .num("bytes_per_sleeper", static_cast<double>(rss - rss_before) * 1024.0 / static_cast<double>(s))
      .print();
}
