// bench/weft/w1_spawn_join.cpp — W1 of BENCHMARKS.md on weft: from one root
// task on a 2-loop runtime, spawn N tasks that each return their index, then
// await every handle and check the sum. Figures: tasks_per_s over the
// spawn+join phase, peak RSS.
//
// Two figures of issue 2 ride along (weft only): idle_cpu_pct, the CPU the
// idle 2-loop runtime uses while nothing runs (10 s, 1 s in a scaled-down
// run), and foreign_spawn_p50_us / _p99_us, how soon a task spawned from a
// plain thread starts on a loop that was asleep in the kernel.
#include <sys/resource.h>

#include <thread>
#include <vector>

#include <weft/weft.hpp>

#include "../common.hpp"

namespace {
weft::task<std::uint64_t> index_of(std::uint64_t i) { co_return i; }

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// Spawns from this (plain) thread onto loops left asleep for a while, and
// records spawn-to-first-instruction latency.
std::vector<double> foreign_spawn_latencies_us(weft::runtime& rt, int samples) {
  std::vector<double> out;
  for (int i = 0; i < samples; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the loops fall asleep
    std::int64_t started = 0;
    const std::int64_t t0 = bench::now_ns();
    rt.spawn([](std::int64_t& s) -> weft::task<void> {
        s = bench::now_ns();
        co_return;
      }(started))
        .join_blocking();
    out.push_back(static_cast<double>(started - t0) / 1e3);
  }
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  const std::size_t n = bench::parse_n(argc, argv, 1'000'000);
  weft::runtime_options o;
  o.loops = 2;
  weft::runtime rt(o);
  auto [sum, wall_ns] = rt.block_on([](std::size_t count) -> weft::task<std::pair<std::uint64_t, std::int64_t>> {
    std::vector<weft::join_handle<std::uint64_t>> handles;
    handles.reserve(count);
    const std::int64_t t0 = bench::now_ns();
    for (std::size_t i = 0; i < count; ++i) handles.push_back(weft::spawn(index_of(i)));
    std::uint64_t s = 0;
    for (auto& h : handles) s += co_await h;
    co_return std::pair{s, bench::now_ns() - t0};
  }(n));
  const std::uint64_t expected = static_cast<std::uint64_t>(n) * (n - 1) / 2;
  if (sum != expected) bench::fail("weft", "W1", "sum " + std::to_string(sum) + " != " + std::to_string(expected));
  const long rss = bench::peak_rss_kb();

  const double idle_s = n >= 1'000'000 ? 10.0 : 1.0;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the loops settle
  const double cpu0 = cpu_seconds();
  const std::int64_t w0 = bench::now_ns();
  std::this_thread::sleep_for(std::chrono::duration<double>(idle_s));
  const double idle_pct = (cpu_seconds() - cpu0) * 100.0 / (static_cast<double>(bench::now_ns() - w0) / 1e9);
  auto lat = foreign_spawn_latencies_us(rt, 200);

  bench::json_line("weft", "W1")
      .num("tasks_per_s", static_cast<double>(n) * 1e9 / static_cast<double>(wall_ns))
      .num("rss_kb", static_cast<double>(rss))
      .num("idle_cpu_pct", idle_pct)
      .num("foreign_spawn_p50_us", bench::percentile(lat, 50))
      .num("foreign_spawn_p99_us", bench::percentile(lat, 99))
      .print();
}
