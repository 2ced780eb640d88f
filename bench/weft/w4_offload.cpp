// bench/weft/w4_offload.cpp — W4 of BENCHMARKS.md on weft: from tasks on a
// 2-loop runtime, hand a blocking no-op to the runtime's pool with offload()
// and await its result back on the loop.
//  (a) N sequential round trips from one task -> rt_p50_us, rt_p99_us
//  (b) N offloads with at most 64 in flight (64 tasks pulling indices from
//      one counter, so the pool never idles while work remains) -> offloads_per_s
//  (b') the same as (b) on a second runtime whose pool may grow to 640 threads
//      (the default cap of a 64-core machine) -> offloads_per_s_640, and
//      pool_threads_640. It shows what a large cap costs each admission,
//      which runs under the pool's lock.
// Checks: every job ran on a pool thread (not a loop) and returned its index,
// and every await resumed on a loop thread of the runtime: the completion is
// queued on the loop that suspended, and (work stealing) an idle peer may
// take it, as an Asio io_context run by two threads would. How many did is
// reported as `resumed_on_peer`. `--n N` sets the count of each part
// (default 100,000).
#include <weft/offload.hpp>
#include <weft/weft.hpp>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "../common.hpp"

namespace {

constexpr std::size_t default_offloads = 100'000;
constexpr std::size_t max_in_flight = 64;  // BENCHMARKS.md (b)
constexpr unsigned big_cap = 640;          // (b'): 10 x 64 cores, Reactor's default there
constexpr std::uint64_t on_a_loop = ~std::uint64_t{0};

// The blocking no-op: its index back, or a marker if it ran on a loop thread.
std::uint64_t job(std::uint64_t i) { return weft::runtime::current() == nullptr ? i : on_a_loop; }

struct figures {
  std::vector<std::int64_t> round_trip_ns;
  std::int64_t concurrent_ns = 0;
  std::size_t bad = 0;    // wrong result, ran on a loop, or resumed off the runtime's loops
  std::size_t moved = 0;  // resumed on the other loop (sequential part)
};

// The await came back to a loop thread of the current runtime.
bool on_a_loop_thread() { return weft::runtime::current() != nullptr; }

weft::task<void> sequential(std::size_t n, figures& out) {
  out.round_trip_ns.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto before = std::this_thread::get_id();
    const std::int64_t t0 = bench::now_ns();
    std::uint64_t r = co_await weft::offload([i] { return job(i); });
    out.round_trip_ns[i] = bench::now_ns() - t0;
    if (r != i || !on_a_loop_thread()) ++out.bad;
    if (std::this_thread::get_id() != before) ++out.moved;
  }
}

weft::task<std::size_t> puller(std::atomic<std::size_t>& next, std::size_t n) {
  std::size_t bad = 0;
  for (std::size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) {
    std::uint64_t r = co_await weft::offload([i] { return job(i); });
    if (r != i || !on_a_loop_thread()) ++bad;
  }
  co_return bad;
}

weft::task<void> concurrent(std::size_t n, figures& out) {
  std::atomic<std::size_t> next{0};
  std::vector<weft::join_handle<std::size_t>> pullers;
  const std::int64_t t0 = bench::now_ns();
  for (std::size_t w = 0; w < max_in_flight && w < n; ++w) pullers.push_back(weft::spawn(puller(next, n)));
  for (auto& h : pullers) out.bad += co_await h;
  out.concurrent_ns = bench::now_ns() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t n = bench::parse_n(argc, argv, default_offloads);
  weft::runtime_options o;
  o.loops = 2;
  weft::runtime rt(o);
  figures out;
  rt.block_on(sequential(n, out));
  rt.block_on(concurrent(n, out));
  const auto pool = rt.blocking().stats();
  const long rss_kb = bench::peak_rss_kb();  // before (b'), whose threads would add their stacks

  figures wide;
  weft::runtime_options big = o;
  big.blocking.max_threads = big_cap;
  weft::elastic_stats wide_pool;
  {
    weft::runtime rt640(big);
    rt640.block_on(concurrent(n, wide));
    wide_pool = rt640.blocking().stats();
  }
  out.bad += wide.bad;
  if (out.bad != 0) bench::fail("weft", "W4", std::to_string(out.bad) + " offloads returned a wrong result, ran on a loop or resumed off the loops");
  if (pool.completed != 2 * n) {
    bench::fail("weft", "W4", "the pool completed " + std::to_string(pool.completed) + " jobs, not " + std::to_string(2 * n));
  }
  if (wide_pool.completed != n) {
    bench::fail("weft", "W4", "the 640-thread pool completed " + std::to_string(wide_pool.completed) + " jobs, not " +
                                  std::to_string(n));
  }
  const double p50 = static_cast<double>(bench::percentile(out.round_trip_ns, 50.0)) / 1e3;
  const double p99 = static_cast<double>(bench::percentile(out.round_trip_ns, 99.0)) / 1e3;
  bench::json_line("weft", "W4")
      .num("rt_p50_us", p50)
      .num("rt_p99_us", p99)
      .num("offloads_per_s", static_cast<double>(n) * 1e9 / static_cast<double>(out.concurrent_ns))
      .num("offloads_per_s_640", static_cast<double>(n) * 1e9 / static_cast<double>(wide.concurrent_ns))
      .num("rss_kb", static_cast<double>(rss_kb))
      .num("pool_threads", static_cast<double>(pool.largest_pool_size))
      .num("pool_threads_640", static_cast<double>(wide_pool.largest_pool_size))
      .num("resumed_on_peer", static_cast<double>(out.moved))
      .print();
}
