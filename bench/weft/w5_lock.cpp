// bench/weft/w5_lock.cpp — W5 of BENCHMARKS.md on weft, plus two lock
// figures of issue 5, in one program on a 2-loop runtime.
//
// W5: T tasks (--n, default 1,000) each do K = 100 rounds of: acquire the
// actor_lock, read the shared counter, yield while holding it, write the
// counter + 1, release. Checks counter = T·K (two holders at once would lose
// increments) and reports handoffs_per_s = T·K / wall and fifo: true when the
// tasks' first-round grants came in the order they asked. The ask order is
// recorded as the Asio program does: a ticket drawn under a mutex in the same
// critical section that posts the ask (round 0 only).
//
// uncontended_ns: one task acquiring and releasing a free lock, the median
// of 5 runs of 2,000,000 pairs.
//
// keyed: 1,000,000 distinct keys, each acquired and released once by 8
// workers, through one keyed_lock. Checks keys() == 0 afterwards (reported as
// keyed_keys_after) and reports keyed_rss_growth_pct, the growth of the
// resident set (VmRSS, not the peak) from before the run to after it.
#include <algorithm>
#include <coroutine>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <weft/actor_lock.hpp>
#include <weft/keyed_lock.hpp>
#include <weft/weft.hpp>

#include "../common.hpp"

namespace {

constexpr std::size_t kRounds = 100;
constexpr std::size_t kUncontendedPairs = 2'000'000;
constexpr int kUncontendedRuns = 5;
constexpr std::size_t kKeys = 1'000'000;
constexpr int kKeyWorkers = 8;

struct shared_state {
  weft::actor_lock lock;
  std::uint64_t counter = 0;                 // guarded by lock
  std::vector<std::uint64_t> first_grants;   // guarded by lock: ticket of the i-th first-round grant
  std::size_t first_granted = 0;             // guarded by lock
  std::mutex ask_mutex;                      // round 0 only
  std::uint64_t next_ticket = 0;             // guarded by ask_mutex
};

// acquire() whose ask is posted under ask_mutex together with drawing its
// ticket, so ticket order is the order the asks reached the lock.
struct ticketed_acquire {
  weft::actor_lock::acquire_awaiter inner;
  shared_state& s;
  std::uint64_t ticket = 0;

  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h) {
    std::lock_guard<std::mutex> g(s.ask_mutex);
    ticket = s.next_ticket++;
    return inner.await_suspend(h);
  }
  std::pair<weft::lock_guard, std::uint64_t> await_resume() { return {inner.await_resume(), ticket}; }
};

weft::task<void> contender(shared_state& s) {
  for (std::size_t round = 0; round < kRounds; ++round) {
    weft::lock_guard g;
    if (round == 0) {
      // A named local, not a temporary: GCC 12 copies aggregate temporaries
      // of a co_await bitwise (see weft/lock_guard.hpp).
      ticketed_acquire ask{s.lock.acquire(), s};
      auto [granted, ticket] = co_await ask;
      g = std::move(granted);
      s.first_grants[s.first_granted++] = ticket;
    } else {
      g = co_await s.lock.acquire();
    }
    const std::uint64_t seen = s.counter;
    co_await weft::yield();
    s.counter = seen + 1;
  }
}

weft::task<std::int64_t> w5(shared_state& s, std::size_t tasks) {
  std::vector<weft::join_handle<void>> hs;
  hs.reserve(tasks);
  const std::int64_t t0 = bench::now_ns();
  for (std::size_t t = 0; t < tasks; ++t) hs.push_back(weft::spawn(contender(s)));
  for (auto& h : hs) co_await h;
  co_return bench::now_ns() - t0;
}

weft::task<double> uncontended(weft::actor_lock& lock) {
  std::vector<double> runs;
  for (int r = 0; r < kUncontendedRuns; ++r) {
    const std::int64_t t0 = bench::now_ns();
    for (std::size_t i = 0; i < kUncontendedPairs; ++i) {
      weft::lock_guard g = co_await lock.acquire();
    }
    runs.push_back(static_cast<double>(bench::now_ns() - t0) / static_cast<double>(kUncontendedPairs));
  }
  co_return bench::percentile(runs, 50);
}

weft::task<void> key_worker(weft::keyed_lock& keys, int worker, std::size_t n) {
  std::string key;
  for (std::size_t i = static_cast<std::size_t>(worker); i < n; i += kKeyWorkers) {
    key = "user:" + std::to_string(i);
    weft::lock_guard g = co_await keys.acquire(key, weft::clock::duration::max());
  }
}

weft::task<void> keyed_run(weft::keyed_lock& keys, std::size_t n) {
  std::vector<weft::join_handle<void>> hs;
  for (int w = 0; w < kKeyWorkers; ++w) hs.push_back(weft::spawn(key_worker(keys, w, n)));
  for (auto& h : hs) co_await h;
}

// Resident set now (VmRSS), KiB; 0 without /proc.
long rss_kb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t tasks = bench::parse_n(argc, argv, 1'000);
  weft::runtime_options o;
  o.loops = 2;
  weft::runtime rt(o);

  shared_state s;
  s.first_grants.resize(tasks);
  const std::int64_t wall_ns = rt.block_on(w5(s, tasks));
  const std::uint64_t expected = static_cast<std::uint64_t>(tasks) * kRounds;
  if (s.counter != expected)
    bench::fail("weft", "W5",
                "counter " + std::to_string(s.counter) + " != " + std::to_string(expected) + " (two holders at once)");
  if (s.first_granted != tasks) bench::fail("weft", "W5", "not every task got its first grant");
  if (s.lock.locked() || s.lock.waiters() != 0) bench::fail("weft", "W5", "the lock was left held or with waiters");
  bool fifo = true;
  for (std::size_t i = 0; i < tasks; ++i) fifo = fifo && s.first_grants[i] == i;
  const long w5_rss = bench::peak_rss_kb();

  weft::actor_lock solo;
  const double uncontended_ns = rt.block_on(uncontended(solo));

  weft::keyed_lock keys;
  const std::size_t key_count = std::min(kKeys, tasks * 1'000);
  const long rss_before = rss_kb();
  const std::int64_t k0 = bench::now_ns();
  rt.block_on(keyed_run(keys, key_count));
  const std::int64_t keyed_ns = bench::now_ns() - k0;
  const long rss_after = rss_kb();
  const std::size_t keys_after = keys.keys();
  if (keys_after != 0) bench::fail("weft", "W5", "keyed_lock kept " + std::to_string(keys_after) + " idle keys");
  const double growth_pct =
      rss_before > 0 ? 100.0 * static_cast<double>(rss_after - rss_before) / static_cast<double>(rss_before) : 0.0;

  bench::json_line("weft", "W5")
      .num("handoffs_per_s", static_cast<double>(expected) * 1e9 / static_cast<double>(wall_ns))
      .boolean("fifo", fifo)
      .integer("rss_kb", w5_rss)
      .integer("n", static_cast<long long>(tasks))
      .num("uncontended_ns", uncontended_ns)
      .integer("keyed_keys", static_cast<long long>(key_count))
      .num("keyed_keys_per_s", static_cast<double>(key_count) * 1e9 / static_cast<double>(keyed_ns))
      .integer("keyed_keys_after", static_cast<long long>(keys_after))
      .num("keyed_rss_growth_pct", growth_pct)
      .print();
  return fifo ? 0 : 1;
}
