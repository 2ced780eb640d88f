// The Boost.Asio side's own plumbing: the two-thread io_context runner, a
// join counter for fan-out, and the "asio" spelling of bench/common.hpp's
// clock, percentiles, RSS, failed-check exit and JSON line, which both
// sides share. The workloads are defined in BENCHMARKS.md in the shared docs.
#pragma once

#include <boost/asio.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "../common.hpp"
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;

namespace asio_bench {

// BENCHMARKS.md: "Asio: one io_context run by 2 threads".
inline constexpr unsigned kThreads = 2;

using bench::now_ns;
using bench::peak_rss_kb;
using bench::percentile;

// A failed self-check exits 1: the harness reports the row FAILED, so a
// benchmark that cannot pass its own check never produces a figure.
[[noreturn]] inline void fail(const char* workload, const std::string& why) {
  bench::fail("asio", workload, why);
}

// `--n N` scales the workload's main size down; each program's header says
// which size N is.
inline std::size_t parse_n(int argc, char** argv, const char* /*workload*/, std::size_t default_n) {
  return bench::parse_n(argc, argv, default_n);
}

// The program's last line, with "system":"asio".
class json_line : public bench::json_line {
 public:
  explicit json_line(const char* workload) : bench::json_line("asio", workload) {}
};

// Fan-in for N concurrent completions: each finished task calls arrive(), and
// one coroutine co_awaits wait() until all N have. Asio 1.81 has no join
// handle that is safe when the task and the joiner run on different threads
// of one io_context (experimental::promise publishes its result and checks
// for a waiter without a lock), so the per-task completion handler reports
// here instead. The wake-up goes through a concurrent_channel because it is
// the thread-safe way to complete a waiting coroutine from any thread.
class wait_group {
 public:
  wait_group(const asio::any_io_executor& ex, std::size_t count)
      : left_(count), done_(ex, 1) {
    if (count == 0) done_.try_send(boost::system::error_code{});
  }

  void arrive() {
    // acq_rel: the last arriver must see every earlier arriver's writes
    // (acquire) and pass them on, through the channel's mutex, to the waiter.
    if (left_.fetch_sub(1, std::memory_order_acq_rel) == 1)
      done_.try_send(boost::system::error_code{});
  }

  asio::awaitable<void> wait() {
    co_await done_.async_receive(asio::use_awaitable);
  }

 private:
  std::atomic<std::size_t> left_;
  asio::experimental::concurrent_channel<void(boost::system::error_code)> done_;
};

// Runs `root` on `where` (an executor of `ioc`, e.g. a strand) with kThreads
// threads running `ioc` (this one plus kThreads - 1), and returns once the
// io_context runs out of work. An exception escaping `root` is rethrown here,
// on the main thread, after every thread has stopped.
inline void run_root(asio::io_context& ioc, const asio::any_io_executor& where,
                     asio::awaitable<void> root) {
  std::exception_ptr escaped;
  asio::co_spawn(where, std::move(root),
                 [&escaped](std::exception_ptr e) { escaped = e; });
  std::vector<std::thread> helpers;
  for (unsigned i = 1; i < kThreads; ++i) helpers.emplace_back([&ioc] { ioc.run(); });
  ioc.run();
  for (auto& t : helpers) t.join();
  if (escaped) std::rethrow_exception(escaped);
}

inline void run_root(asio::io_context& ioc, asio::awaitable<void> root) {
  run_root(ioc, ioc.get_executor(), std::move(root));
}

// main() body shared by every program: runs `body` and turns an escaped
// exception into a failed check rather than std::terminate.
template <class F>
int guarded_main(const char* workload, F&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    fail(workload, std::string("exception: ") + e.what());
  } catch (...) {
    fail(workload, "unknown exception");
  }
  return 0;
}

}  // namespace asio_bench
