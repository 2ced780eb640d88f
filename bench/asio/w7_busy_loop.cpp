// W7 busy loop, Boost.Asio side: P pinger coroutines loop `co_await post()`
// (Asio's yield) for 600 ms and record the largest gap between two of their
// rounds; P sleepers loop a 1 ms steady_timer and record how late each wake
// was against the timer's own expiry. 100 ms in, once every pinger has run,
// one hog coroutine spins for 300 ms without suspending. One io_context run
// by 2 threads shares one queue, so the free thread keeps everything else
// moving. Pinger gaps count from the hog's start, as on weft's side. A
// pinger that never ran by 600 ms fails the check. `--n N` sets P
// (default 1,000). Workload text: BENCHMARKS.md in the shared docs.
#include "common.hpp"

namespace {

using namespace asio_bench;
using ns = std::int64_t;

constexpr const char* kWorkload = "W7";
constexpr ns kRunForNs = 600'000'000;
constexpr ns kHogAfterNs = 100'000'000;
constexpr ns kHogForNs = 300'000'000;

using pinger_out = bench::w7_pinger;

// Gaps that start before `from` (the start-up) are not counted, as on weft's side.
asio::awaitable<void> pinger(ns end, const std::atomic<ns>& from, std::atomic<std::size_t>& ran,
                             pinger_out& out) {
  auto ex = co_await asio::this_coro::executor;
  ran.fetch_add(1, std::memory_order_relaxed);
  ns prev = now_ns();
  while (prev < end) {
    co_await asio::post(ex, asio::use_awaitable);
    const ns t = now_ns();
    if (prev >= from.load(std::memory_order_relaxed) && t - prev > out.max_gap) out.max_gap = t - prev;
    prev = t;
    ++out.rounds;
  }
}

asio::awaitable<void> sleeper(ns end, std::vector<ns>& late) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    timer.expires_after(std::chrono::milliseconds(1));
    co_await timer.async_wait(asio::use_awaitable);
    late.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                        timer.expiry())
                       .count());
    if (now_ns() >= end) co_return;
  }
}

asio::awaitable<void> hog(std::atomic<bool>& hogged) {
  const ns until = now_ns() + kHogForNs;
  while (now_ns() < until) {
  }
  hogged = true;
  co_return;
}

struct outcome {
  bool all_ran = false;
  bool threw = false;
};

asio::awaitable<void> root(std::vector<pinger_out>& pings, std::vector<std::vector<ns>>& lates,
                           std::atomic<std::size_t>& ran, std::atomic<ns>& from, std::atomic<bool>& hogged,
                           outcome& out) {
  auto ex = co_await asio::this_coro::executor;
  const std::size_t p = pings.size();
  const ns end = now_ns() + kRunForNs;
  std::atomic<bool> threw{false};
  wait_group done(ex, 2 * p + 1);
  auto arrive = [&threw, &done](std::exception_ptr e) {
    if (e) threw.store(true, std::memory_order_relaxed);
    done.arrive();
  };
  for (std::size_t i = 0; i < p; ++i) asio::co_spawn(ex, pinger(end, from, ran, pings[i]), arrive);
  for (std::size_t i = 0; i < p; ++i) asio::co_spawn(ex, sleeper(end, lates[i]), arrive);
  asio::steady_timer wait(ex, std::chrono::nanoseconds(kHogAfterNs));
  co_await wait.async_wait(asio::use_awaitable);
  while (ran.load() < p && now_ns() < end) {
    wait.expires_after(std::chrono::milliseconds(1));
    co_await wait.async_wait(asio::use_awaitable);
  }
  out.all_ran = ran.load() == p;
  from = now_ns();
  if (out.all_ran) asio::co_spawn(ex, hog(hogged), arrive);
  else done.arrive();
  co_await done.wait();
  out.threw = threw.load();
}

}  // namespace

int main(int argc, char** argv) {
  return guarded_main(kWorkload, [&] {
    const std::size_t p = parse_n(argc, argv, kWorkload, 1'000);
    std::vector<pinger_out> pings(p);
    std::vector<std::vector<ns>> lates(p);
    // At most one wake per ms: reserved up front, as on weft's side.
    for (auto& v : lates) v.reserve(kRunForNs / 1'000'000 + 16);
    std::atomic<std::size_t> ran{0};
    std::atomic<ns> from{INT64_MAX};
    std::atomic<bool> hogged{false};
    outcome out;
    asio::io_context ioc(kThreads);
    run_root(ioc, root(pings, lates, ran, from, hogged, out));
    if (out.threw) fail(kWorkload, "a task threw");
    if (!out.all_ran) fail(kWorkload, std::to_string(p - ran.load()) + " pingers never ran");
    if (!hogged) fail(kWorkload, "the hog did not run");
    bench::print_w7("asio", pings, lates);
  });
}
