// W1 spawn/join, Boost.Asio side: from one root coroutine, co_spawn N tasks
// that each return their index, join them all and check the sum. Reports
// tasks_per_s over the spawn+join phase and peak RSS. `--n N` sets N
// (default 1,000,000). Workload text: BENCHMARKS.md in the shared docs.
#include "common.hpp"

namespace {

using namespace asio_bench;

constexpr const char* kWorkload = "W1";
constexpr std::size_t kDefaultTasks = 1'000'000;

asio::awaitable<std::uint64_t> child(std::uint64_t index) { co_return index; }

struct outcome {
  std::int64_t phase_ns = 0;
  std::uint64_t sum = 0;
  bool any_threw = false;
};

asio::awaitable<void> root(std::size_t n, outcome& out) {
  auto ex = co_await asio::this_coro::executor;
  std::atomic<std::uint64_t> sum{0};
  std::atomic<bool> threw{false};

  const std::int64_t start = now_ns();
  wait_group joined(ex, n);
  for (std::size_t i = 0; i < n; ++i) {
    // Each task's own completion handler is its join: it receives that
    // task's result (or exception) and counts it in. Relaxed is enough for
    // the sum because wait_group orders every arrive() before wait() returns.
    asio::co_spawn(ex, child(i),
                   [&sum, &threw, &joined](std::exception_ptr e, std::uint64_t v) {
                     if (e)
                       threw.store(true, std::memory_order_relaxed);
                     else
                       sum.fetch_add(v, std::memory_order_relaxed);
                     joined.arrive();
                   });
  }
  co_await joined.wait();
  out.phase_ns = now_ns() - start;
  out.sum = sum.load(std::memory_order_relaxed);
  out.any_threw = threw.load(std::memory_order_relaxed);
}

}  // namespace

int main(int argc, char** argv) {
  return guarded_main(kWorkload, [&] {
    const std::size_t n = parse_n(argc, argv, kWorkload, kDefaultTasks);
    asio::io_context ioc(kThreads);
    outcome out;
    run_root(ioc, root(n, out));

    if (out.any_threw) fail(kWorkload, "a task completed with an exception");
    const std::uint64_t expected = static_cast<std::uint64_t>(n) * (n - 1) / 2;
    if (out.sum != expected)
      fail(kWorkload, "sum " + std::to_string(out.sum) + " != " + std::to_string(expected));

    json_line(kWorkload)
        .num("tasks_per_s", static_cast<double>(n) * 1e9 / static_cast<double>(out.phase_ns))
        .integer("rss_kb", peak_rss_kb())
        .integer("n", static_cast<long long>(n))
        .print();
  });
}
