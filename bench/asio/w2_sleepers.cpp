// W2 sleepers, Boost.Asio side: S tasks, task i sleeps d_i ms (d_i uniform in
// [1, 100], std::mt19937 seeded 42) on its own steady_timer and records how
// late it woke against the timer's own deadline. Waking early fails the
// check. Reports lateness p50/p99/max in µs, the wall time of the whole run
// and peak RSS. `--n N` sets S (default 100,000). Workload text:
// BENCHMARKS.md in the shared docs.
#include "common.hpp"

#include <random>

namespace {

using namespace asio_bench;

constexpr const char* kWorkload = "W2";
constexpr std::size_t kDefaultSleepers = 100'000;
constexpr int kMinDelayMs = 1;
constexpr int kMaxDelayMs = 100;
constexpr unsigned kSeed = 42;  // fixed so every run sleeps the same durations

asio::awaitable<void> sleeper(std::chrono::milliseconds delay, std::int64_t& lateness_ns) {
  asio::steady_timer timer(co_await asio::this_coro::executor, delay);
  co_await timer.async_wait(asio::use_awaitable);
  // Measured against the deadline the timer itself was armed with, on the
  // same steady_clock, so the only thing in the figure is wake-up latency.
  lateness_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now() - timer.expiry())
                    .count();
}

struct outcome {
  std::int64_t wall_ns = 0;
  bool any_threw = false;
};

asio::awaitable<void> root(const std::vector<int>& delays_ms,
                           std::vector<std::int64_t>& lateness_ns, outcome& out) {
  auto ex = co_await asio::this_coro::executor;
  std::atomic<bool> threw{false};
  const std::int64_t start = now_ns();
  wait_group woken(ex, delays_ms.size());
  for (std::size_t i = 0; i < delays_ms.size(); ++i) {
    asio::co_spawn(ex, sleeper(std::chrono::milliseconds(delays_ms[i]), lateness_ns[i]),
                   [&threw, &woken](std::exception_ptr e) {
                     if (e) threw.store(true, std::memory_order_relaxed);
                     woken.arrive();
                   });
  }
  co_await woken.wait();
  out.wall_ns = now_ns() - start;
  out.any_threw = threw.load(std::memory_order_relaxed);
}

}  // namespace

int main(int argc, char** argv) {
  return guarded_main(kWorkload, [&] {
    const std::size_t s = parse_n(argc, argv, kWorkload, kDefaultSleepers);
    std::mt19937 gen(kSeed);
    std::uniform_int_distribution<int> dist(kMinDelayMs, kMaxDelayMs);
    std::vector<int> delays_ms(s);
    for (auto& d : delays_ms) d = dist(gen);
    // Each task writes only its own slot; wait_group orders those writes
    // before the root (and so main) reads them.
    std::vector<std::int64_t> lateness_ns(s, -1);

    asio::io_context ioc(kThreads);
    outcome out;
    run_root(ioc, root(delays_ms, lateness_ns, out));

    if (out.any_threw) fail(kWorkload, "a sleeper completed with an exception");
    for (std::size_t i = 0; i < s; ++i) {
      if (lateness_ns[i] < 0)
        fail(kWorkload, "task " + std::to_string(i) + " woke " +
                            std::to_string(-lateness_ns[i]) + " ns before its deadline");
    }

    const long rss = peak_rss_kb();
    const double p50 = static_cast<double>(percentile(lateness_ns, 50.0)) / 1e3;
    const double p99 = static_cast<double>(percentile(lateness_ns, 99.0)) / 1e3;
    const double max = static_cast<double>(*std::max_element(lateness_ns.begin(), lateness_ns.end())) / 1e3;
    json_line(kWorkload)
        .num("p50_us", p50)
        .num("p99_us", p99)
        .num("max_us", max)
        .num("wall_ms", static_cast<double>(out.wall_ns) / 1e6)
        .integer("rss_kb", rss)
        .integer("n", static_cast<long long>(s))
        .print();
  });
}
