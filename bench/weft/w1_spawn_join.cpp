// bench/weft/w1_spawn_join.cpp — W1 of BENCHMARKS.md on weft: from one root
// task on a 2-loop runtime, spawn N tasks that each return their index, then
// await every handle and check the sum. Figures: tasks_per_s over the
// spawn+join phase, peak RSS.
#include <vector>

#include <weft/weft.hpp>

#include "../common.hpp"

namespace {
weft::task<std::uint64_t> index_of(std::uint64_t i) { co_return i; }
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
  bench::json_line("weft", "W1")
      .num("tasks_per_s", static_cast<double>(n) * 1e9 / static_cast<double>(wall_ns))
      .num("rss_kb", static_cast<double>(bench::peak_rss_kb()))
      .print();
}
