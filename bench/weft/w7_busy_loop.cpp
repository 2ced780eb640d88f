// bench/weft/w7_busy_loop.cpp — W7 of BENCHMARKS.md on weft: P pinger tasks
// loop `co_await yield()` for 600 ms and record the largest gap between two
// of their rounds; P sleeper tasks loop `sleep_for(1 ms)` and record how late
// each wake was. 100 ms in, once every pinger has run, one hog task spins
// for 300 ms without suspending. Where runnable tasks and due timers move to
// the free loop, the hog costs a pinger about one pass of that loop over its
// queue; where they are pinned, a third of a second. Pinger gaps count from
// the hog's start (the start-up, 2P tasks spawned and first run, is not what
// W7 measures); sleeper lateness counts throughout. A pinger that never ran
// by 600 ms, or a sleeper that woke early, fails the check. `--n N` sets P
// (default 1,000).
#include <atomic>
#include <vector>

#include <weft/weft.hpp>

#include "../common.hpp"

namespace {

using std::chrono::milliseconds;
using ns = std::int64_t;

constexpr ns run_for_ns = 600'000'000;
constexpr ns hog_after_ns = 100'000'000;
constexpr ns hog_for_ns = 300'000'000;

using pinger_out = bench::w7_pinger;

// Gaps that start before `from` (the start-up, while 2P tasks are being
// spawned and first run) are not counted: the figure is about the hog.
weft::task<void> pinger(ns end, const std::atomic<ns>& from, std::atomic<std::size_t>& ran, pinger_out& out) {
  ran.fetch_add(1, std::memory_order_relaxed);
  ns prev = bench::now_ns();
  while (prev < end) {
    co_await weft::yield();
    const ns t = bench::now_ns();
    if (prev >= from.load(std::memory_order_relaxed) && t - prev > out.max_gap) out.max_gap = t - prev;
    prev = t;
    ++out.rounds;
  }
}

weft::task<void> sleeper(ns end, std::vector<ns>& late) {
  for (;;) {
    const auto due = weft::clock::now() + milliseconds(1);
    co_await weft::sleep_until(due);
    const auto now = weft::clock::now();
    late.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(now - due).count());
    if (bench::now_ns() >= end) co_return;
  }
}

weft::task<void> hog(std::atomic<bool>& hogged) {
  const ns until = bench::now_ns() + hog_for_ns;
  while (bench::now_ns() < until) {
  }
  hogged = true;
  co_return;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t p = bench::parse_n(argc, argv, 1'000);
  weft::runtime_options o;
  o.loops = 2;
  weft::runtime rt(o);
  std::vector<pinger_out> pings(p);
  std::vector<std::vector<ns>> lates(p);
  // At most one wake per ms: room for all of them up front, so that no
  // sleeper grows its vector (and faults in fresh pages) mid-run, all of
  // them in the same round.
  for (auto& v : lates) v.reserve(run_for_ns / 1'000'000 + 16);
  std::atomic<std::size_t> ran{0};
  std::atomic<ns> from{INT64_MAX};
  std::atomic<bool> hogged{false};
  bool all_ran = false;
  rt.block_on([&]() -> weft::task<void> {
    const ns t0 = bench::now_ns();
    const ns end = t0 + run_for_ns;
    std::vector<weft::join_handle<void>> hs;
    hs.reserve(2 * p + 1);
    for (std::size_t i = 0; i < p; ++i) hs.push_back(weft::spawn(pinger(end, from, ran, pings[i])));
    for (std::size_t i = 0; i < p; ++i) hs.push_back(weft::spawn(sleeper(end, lates[i])));
    co_await weft::sleep_for(std::chrono::nanoseconds(hog_after_ns));
    while (ran.load() < p && bench::now_ns() < end) co_await weft::sleep_for(milliseconds(1));
    all_ran = ran.load() == p;
    from = bench::now_ns();
    if (all_ran) hs.push_back(weft::spawn(hog(hogged)));
    for (auto& h : hs) co_await h;
  }());
  if (!all_ran)
    bench::fail("weft", "W7", std::to_string(p - ran.load()) + " of " + std::to_string(p) + " pingers never ran");
  if (!hogged) bench::fail("weft", "W7", "the hog did not run");
  bench::print_w7("weft", pings, lates);
}
