// W4 offload, Boost.Asio side: from a coroutine on the io_context, hand a
// blocking no-op to an asio::thread_pool and await its result back on the
// io_context. (a) sequential round trips -> rt_p50_us, rt_p99_us; (b) the
// same number of offloads with at most 64 in flight -> offloads_per_s.
// `--n N` sets the count of each part (default 100,000). Workload text:
// BENCHMARKS.md in the shared docs.
#include "common.hpp"

#include <limits>
#include <type_traits>

namespace {

using namespace asio_bench;

constexpr const char* kWorkload = "W4";
constexpr std::size_t kDefaultOffloads = 100'000;
constexpr std::size_t kMaxInFlight = 64;  // BENCHMARKS.md (b)
constexpr std::uint64_t kWrongThread = std::numeric_limits<std::uint64_t>::max();

// Runs fn() on `pool` and completes `token` with its result on the caller's
// associated executor. This is the hand-written composed operation an Asio
// user writes for the job: `co_await asio::post(pool, use_awaitable)` looks
// like it, but in Asio 1.81 post() only bounces through the pool and resumes
// the coroutine on its own executor, so nothing would run on the pool.
template <class F, class CompletionToken>
auto async_offload(asio::thread_pool& pool, F fn, CompletionToken&& token) {
  using result_type = std::invoke_result_t<F&>;
  return asio::async_initiate<CompletionToken, void(result_type)>(
      [&pool](auto handler, F job) {
        // Tracked work on the caller's executor, so that its io_context does
        // not run out of work and return while the job is on the pool.
        auto home = asio::prefer(asio::get_associated_executor(handler),
                                 asio::execution::outstanding_work.tracked);
        asio::post(pool, [job = std::move(job), handler = std::move(handler),
                          home = std::move(home)]() mutable {
          result_type result = job();
          asio::dispatch(home, [handler = std::move(handler), result]() mutable {
            std::move(handler)(result);
          });
        });
      },
      token, std::move(fn));
}

struct outcome {
  std::vector<std::int64_t> round_trip_ns;
  std::int64_t concurrent_ns = 0;
  std::size_t bad_results = 0;   // job did not run on the pool, or result lost
  std::size_t off_the_loop = 0;  // awaiting coroutine resumed off the io_context
};

asio::awaitable<void> sequential(asio::io_context& ioc, asio::thread_pool& pool,
                                 std::size_t n, outcome& out) {
  auto pool_ex = pool.get_executor();
  out.round_trip_ns.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t t0 = now_ns();
    std::uint64_t r = co_await async_offload(
        pool, [i, pool_ex] { return pool_ex.running_in_this_thread() ? i : kWrongThread; },
        asio::use_awaitable);
    out.round_trip_ns[i] = now_ns() - t0;
    if (r != i) ++out.bad_results;
    if (!ioc.get_executor().running_in_this_thread()) ++out.off_the_loop;
  }
}

asio::awaitable<void> concurrent(asio::io_context& ioc, asio::thread_pool& pool,
                                 std::size_t n, outcome& out) {
  auto ex = co_await asio::this_coro::executor;
  auto pool_ex = pool.get_executor();
  std::atomic<std::size_t> next{0}, bad{0}, off_loop{0};
  std::atomic<bool> threw{false};

  // kMaxInFlight workers pulling indices from one counter: at most that many
  // offloads are outstanding, and the pool is never idle while work remains.
  auto worker = [&]() -> asio::awaitable<void> {
    for (std::size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) {
      std::uint64_t r = co_await async_offload(
          pool, [i, pool_ex] { return pool_ex.running_in_this_thread() ? i : kWrongThread; },
          asio::use_awaitable);
      if (r != i) bad.fetch_add(1, std::memory_order_relaxed);
      if (!ioc.get_executor().running_in_this_thread())
        off_loop.fetch_add(1, std::memory_order_relaxed);
    }
  };

  const std::int64_t start = now_ns();
  const std::size_t workers = std::min(kMaxInFlight, n);
  wait_group finished(ex, workers);
  for (std::size_t w = 0; w < workers; ++w) {
    asio::co_spawn(ex, worker(), [&threw, &finished](std::exception_ptr e) {
      if (e) threw.store(true, std::memory_order_relaxed);
      finished.arrive();
    });
  }
  co_await finished.wait();
  out.concurrent_ns = now_ns() - start;
  if (threw.load()) throw std::runtime_error("an offload worker threw");
  out.bad_results += bad.load();
  out.off_the_loop += off_loop.load();
}

}  // namespace

int main(int argc, char** argv) {
  return guarded_main(kWorkload, [&] {
    const std::size_t n = parse_n(argc, argv, kWorkload, kDefaultOffloads);
    asio::io_context ioc(kThreads);
    // Asio's default size (2 x hardware threads): what a user gets from
    // `asio::thread_pool pool;`, and weft's blocking pool is elastic anyway.
    asio::thread_pool pool;
    const unsigned pool_threads = 2 * std::max(1u, std::thread::hardware_concurrency());
    outcome out;
    run_root(ioc, [&]() -> asio::awaitable<void> {
      co_await sequential(ioc, pool, n, out);
      co_await concurrent(ioc, pool, n, out);
    }());
    pool.join();

    if (out.bad_results != 0)
      fail(kWorkload, std::to_string(out.bad_results) + " offloads returned a wrong result or ran off the pool");
    if (out.off_the_loop != 0)
      fail(kWorkload, std::to_string(out.off_the_loop) + " awaits resumed off the io_context");

    const double p50 = static_cast<double>(percentile(out.round_trip_ns, 50.0)) / 1e3;
    const double p99 = static_cast<double>(percentile(out.round_trip_ns, 99.0)) / 1e3;
    json_line(kWorkload)
        .num("rt_p50_us", p50)
        .num("rt_p99_us", p99)
        .num("offloads_per_s", static_cast<double>(n) * 1e9 / static_cast<double>(out.concurrent_ns))
        .integer("rss_kb", peak_rss_kb())
        .integer("pool_threads", pool_threads)
        .integer("n", static_cast<long long>(n))
        .print();
  });
}
