// W5 async lock, Boost.Asio side: T tasks each do K rounds of acquire,
// increment a shared counter, yield once while holding the lock, release.
// Asio has no async mutex, so the lock is a channel used as a semaphore (see
// channel_lock). Checks counter = T*K and mutual exclusion; reports
// handoffs_per_s = T*K / wall and fifo (every task's first grant came in the
// order the tasks asked). `--n N` sets T (default 1,000; K stays 100).
// Workload text: BENCHMARKS.md in the shared docs.
#include "common.hpp"

#include <mutex>

namespace {

using namespace asio_bench;
using boost::system::error_code;

constexpr const char* kWorkload = "W5";
constexpr std::size_t kDefaultTasks = 1'000;
constexpr std::size_t kRounds = 100;

// A lock made of a one-slot asio::experimental channel, the concurrent
// (mutex-guarded) variant because the tasks run on two threads. Acquiring
// sends into the slot; a send that finds it full waits in the channel's
// queue of senders. Releasing receives from the slot, and the channel then
// moves the first waiting sender's value in and completes that sender: a
// direct hand-off in the order the senders queued, so no waiter can barge.
class channel_lock {
 public:
  explicit channel_lock(const asio::any_io_executor& ex) : slot_(ex, 1) {}

  template <class CompletionToken>
  auto async_acquire(CompletionToken&& token) {
    return slot_.async_send(error_code{}, std::forward<CompletionToken>(token));
  }

  // Precondition: the caller holds the lock. False if it did not.
  bool release() { return slot_.try_receive([](error_code) {}); }

 private:
  asio::experimental::concurrent_channel<void(error_code)> slot_;
};

struct shared_state {
  explicit shared_state(const asio::any_io_executor& ex, std::size_t tasks)
      : lock(ex), first_grants(tasks) {}

  channel_lock lock;
  // Guarded by `lock`. Read before the yield and written after it, so that
  // two holders at once would lose increments rather than hide.
  std::uint64_t counter = 0;
  std::vector<std::uint32_t> first_grants;  // guarded by `lock`: ticket of the i-th first-round grant
  std::size_t first_granted = 0;            // guarded by `lock`
  std::atomic<bool> bad_release{false};

  // Tickets record the order of first-round asks. The ticket is taken under
  // ask_mutex in the same critical section that starts the channel send, so
  // the recorded order is the order the channel queued the sends, even with
  // the two threads asking at once. Only round 0 pays for it.
  std::mutex ask_mutex;
  std::uint32_t next_ticket = 0;
};

asio::awaitable<void> acquire_first(shared_state& s, std::uint32_t& ticket) {
  co_await asio::async_initiate<const asio::use_awaitable_t<>&, void(error_code)>(
      [&s, &ticket](auto handler) {
        std::lock_guard<std::mutex> guard(s.ask_mutex);
        ticket = s.next_ticket++;
        s.lock.async_acquire(std::move(handler));
      },
      asio::use_awaitable);
}

asio::awaitable<void> contender(shared_state& s) {
  auto ex = co_await asio::this_coro::executor;
  for (std::size_t round = 0; round < kRounds; ++round) {
    if (round == 0) {
      std::uint32_t ticket = 0;
      co_await acquire_first(s, ticket);
      s.first_grants[s.first_granted++] = ticket;
    } else {
      co_await s.lock.async_acquire(asio::use_awaitable);
    }
    const std::uint64_t seen = s.counter;
    co_await asio::post(ex, asio::use_awaitable);  // the yield while holding
    s.counter = seen + 1;
    if (!s.lock.release()) s.bad_release.store(true);
  }
}

struct outcome {
  std::int64_t wall_ns = 0;
  bool any_threw = false;
};

asio::awaitable<void> root(shared_state& s, std::size_t tasks, outcome& out) {
  auto ex = co_await asio::this_coro::executor;
  std::atomic<bool> threw{false};
  const std::int64_t start = now_ns();
  wait_group finished(ex, tasks);
  for (std::size_t t = 0; t < tasks; ++t) {
    asio::co_spawn(ex, contender(s), [&threw, &finished](std::exception_ptr e) {
      if (e) threw.store(true, std::memory_order_relaxed);
      finished.arrive();
    });
  }
  co_await finished.wait();
  out.wall_ns = now_ns() - start;
  out.any_threw = threw.load(std::memory_order_relaxed);
}

}  // namespace

int main(int argc, char** argv) {
  return guarded_main(kWorkload, [&] {
    const std::size_t tasks = parse_n(argc, argv, kWorkload, kDefaultTasks);
    asio::io_context ioc(kThreads);
    shared_state s(ioc.get_executor(), tasks);
    outcome out;
    run_root(ioc, root(s, tasks, out));

    if (out.any_threw) fail(kWorkload, "a task completed with an exception");
    if (s.bad_release.load()) fail(kWorkload, "a release found the lock free");
    const std::uint64_t expected = static_cast<std::uint64_t>(tasks) * kRounds;
    if (s.counter != expected)
      fail(kWorkload, "counter " + std::to_string(s.counter) + " != " + std::to_string(expected) +
                          " (two holders at once)");
    if (s.first_granted != tasks) fail(kWorkload, "not every task got its first grant");
    bool fifo = true;
    for (std::size_t i = 0; i < tasks; ++i) fifo = fifo && s.first_grants[i] == i;

    json_line(kWorkload)
        .num("handoffs_per_s", static_cast<double>(expected) * 1e9 / static_cast<double>(out.wall_ns))
        .boolean("fifo", fifo)
        .integer("rss_kb", peak_rss_kb())
        .integer("n", static_cast<long long>(tasks))
        .print();
  });
}
