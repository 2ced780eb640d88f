// W3 timer churn, Boost.Asio side: co_spawn M tasks that each sleep on their
// own steady_timer for a duration uniform in [1 s, 60 s], then cancel every
// one through the cancellation slot bound to its co_spawn (Asio's join
// handle) and join them all; none may fire. Reports ns_per_op = wall of the
// whole spawn+arm+cancel+join phase / M, and peak RSS. `--n N` sets M
// (default 1,000,000). Workload text: BENCHMARKS.md in the shared docs.
//
// Unlike the other programs, this one prints its JSON line even when the
// check fails (with "fired" > 0, exit 1): here the failure is a speed limit
// (an arm-to-cancel gap over a second), and its figure is worth recording.
#include "common.hpp"

#include <random>

namespace {

using namespace asio_bench;

constexpr const char* kWorkload = "W3";
constexpr std::size_t kDefaultTasks = 1'000'000;
constexpr int kMinSleepMs = 1'000;
constexpr int kMaxSleepMs = 60'000;
constexpr unsigned kSeed = 42;

asio::awaitable<void> sleeper(std::chrono::milliseconds duration,
                              std::atomic<std::size_t>& fired) {
  // A cancel that arrives before the body starts leaves only a flag in the
  // cancellation state; reading it here avoids arming a timer whose cancel
  // was already spent. With throw_if_cancelled off, a cancelled sleeper ends
  // without an exception: a million throws would cost more than the timers.
  co_await asio::this_coro::throw_if_cancelled(false);
  auto state = co_await asio::this_coro::cancellation_state;
  if (state.cancelled() != asio::cancellation_type::none) co_return;

  asio::steady_timer timer(co_await asio::this_coro::executor, duration);
  auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  if (!ec) fired.fetch_add(1, std::memory_order_relaxed);
}

struct outcome {
  std::int64_t phase_ns = 0;
  std::int64_t arm_ns = 0;  // the spawn loop alone, to explain a failed run
  std::size_t fired = 0;
  bool any_threw = false;
};

// Runs on a strand that its children share. A cancellation_signal must be
// emitted where its operation runs; with the root and every sleeper on one
// strand, emit() below never races a sleeper running on the other io_context
// thread. (A strand per sleeper, with the handler bound to it so that
// co_spawn forwards the emit, is also correct but measured ~1.5x slower
// here: a strand allocation per task and a strand hop per cancel.)
asio::awaitable<void> root(std::size_t m, outcome& out) {
  auto ex = co_await asio::this_coro::executor;
  std::mt19937 gen(kSeed);
  std::uniform_int_distribution<int> dist(kMinSleepMs, kMaxSleepMs);
  std::atomic<std::size_t> fired{0};
  std::atomic<bool> threw{false};

  const std::int64_t start = now_ns();
  wait_group joined(ex, m);
  std::vector<asio::cancellation_signal> handles(m);
  for (std::size_t i = 0; i < m; ++i) {
    asio::co_spawn(ex, sleeper(std::chrono::milliseconds(dist(gen)), fired),
                   asio::bind_cancellation_slot(
                       handles[i].slot(), [&threw, &joined](std::exception_ptr e) {
                         if (e) threw.store(true, std::memory_order_relaxed);
                         joined.arrive();
                       }));
  }
  out.arm_ns = now_ns() - start;
  for (auto& handle : handles) handle.emit(asio::cancellation_type::terminal);
  co_await joined.wait();
  out.phase_ns = now_ns() - start;
  out.fired = fired.load(std::memory_order_relaxed);
  out.any_threw = threw.load(std::memory_order_relaxed);
}

}  // namespace

int main(int argc, char** argv) {
  return guarded_main(kWorkload, [&] {
    const std::size_t m = parse_n(argc, argv, kWorkload, kDefaultTasks);
    asio::io_context ioc(kThreads);
    outcome out;
    run_root(ioc, asio::make_strand(ioc), root(m, out));

    if (out.any_threw) fail(kWorkload, "a sleeper completed with an exception");
    json_line(kWorkload)
        .num("ns_per_op", static_cast<double>(out.phase_ns) / static_cast<double>(m))
        .integer("rss_kb", peak_rss_kb())
        .num("arm_ms", static_cast<double>(out.arm_ns) / 1e6)
        .integer("fired", static_cast<long long>(out.fired))
        .integer("n", static_cast<long long>(m))
        .print();
    if (out.fired != 0)
      fail(kWorkload, std::to_string(out.fired) + " of " + std::to_string(m) +
                          " timers fired before their cancel (spawn loop took " +
                          std::to_string(out.arm_ns / 1'000'000) + " ms)");
  });
}
