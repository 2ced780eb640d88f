// W6 tenants, Boost.Asio side (workload defined in bench/README.md): 100
// tenants, each with a limiter of max_concurrency 4 and max_queue 50, run
// 1,000 jobs each; a job is a coroutine that yields once. Every tenant's jobs
// come from 54 (= 4 + 50) client coroutines that submit their next job when
// the previous one returns, so each limiter is full but never over-full.
// Checks every job ran, none was rejected and no tenant ever ran more than 4
// at once; reports jobs_per_s and queue_wait_p99_us (submit to job start).
// `--n N` sets jobs per tenant (default 1,000).
#include "common.hpp"

#include <deque>

namespace {

using namespace asio_bench;
using boost::system::error_code;

constexpr const char* kWorkload = "W6";
constexpr std::size_t kTenants = 100;
constexpr std::size_t kDefaultJobsPerTenant = 1'000;
constexpr std::size_t kMaxConcurrency = 4;
constexpr std::size_t kMaxQueue = 50;
constexpr std::size_t kClientsPerTenant = kMaxConcurrency + kMaxQueue;

// Per-tenant admission: at most kMaxConcurrency jobs run, at most kMaxQueue
// wait, and a job beyond that is rejected at once (weft's coordinator rule).
// The running limit is a channel used as a counting semaphore, the same
// idiom as W5's lock with kMaxConcurrency slots; queued + running is one
// atomic, checked before the job may wait.
class limiter {
 public:
  explicit limiter(const asio::any_io_executor& ex) : slots_(ex, kMaxConcurrency) {}

  // Runs job() under the limits. Returns false if it was rejected; otherwise
  // stores the time it waited for a slot in `queue_wait_ns`.
  template <class Job>
  asio::awaitable<bool> execute(Job job, std::int64_t& queue_wait_ns) {
    if (in_progress_.fetch_add(1, std::memory_order_relaxed) >= kMaxConcurrency + kMaxQueue) {
      in_progress_.fetch_sub(1, std::memory_order_relaxed);
      rejected_.fetch_add(1, std::memory_order_relaxed);
      co_return false;
    }
    const std::int64_t asked = now_ns();
    co_await slots_.async_send(error_code{}, asio::use_awaitable);
    queue_wait_ns = now_ns() - asked;

    const std::size_t now_running = running_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (now_running > kMaxConcurrency) over_limit_.store(true, std::memory_order_relaxed);
    co_await job();
    running_.fetch_sub(1, std::memory_order_relaxed);

    if (!slots_.try_receive([](error_code) {})) bad_release_.store(true);
    in_progress_.fetch_sub(1, std::memory_order_relaxed);
    co_return true;
  }

  std::size_t rejected() const { return rejected_.load(); }
  bool over_limit() const { return over_limit_.load(); }
  bool bad_release() const { return bad_release_.load(); }

  std::atomic<std::size_t> next_job{0};  // hands out this tenant's job indices to its clients

 private:
  asio::experimental::concurrent_channel<void(error_code)> slots_;
  std::atomic<std::size_t> in_progress_{0};  // running + queued
  std::atomic<std::size_t> running_{0};
  std::atomic<std::size_t> rejected_{0};
  std::atomic<bool> over_limit_{false};
  std::atomic<bool> bad_release_{false};
};

asio::awaitable<void> job(std::atomic<std::size_t>& completed) {
  co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  completed.fetch_add(1, std::memory_order_relaxed);
}

asio::awaitable<void> client(limiter& tenant, std::size_t tenant_index, std::size_t jobs,
                             std::vector<std::int64_t>& queue_wait_ns,
                             std::atomic<std::size_t>& completed) {
  for (std::size_t j; (j = tenant.next_job.fetch_add(1, std::memory_order_relaxed)) < jobs;) {
    co_await tenant.execute([&completed] { return job(completed); },
                            queue_wait_ns[tenant_index * jobs + j]);
  }
}

struct outcome {
  std::int64_t wall_ns = 0;
  std::size_t completed = 0;
  bool any_threw = false;
};

asio::awaitable<void> root(std::deque<limiter>& tenants, std::size_t jobs,
                           std::vector<std::int64_t>& queue_wait_ns, outcome& out) {
  auto ex = co_await asio::this_coro::executor;
  std::atomic<std::size_t> completed{0};
  std::atomic<bool> threw{false};
  const std::int64_t start = now_ns();
  wait_group finished(ex, tenants.size() * kClientsPerTenant);
  for (std::size_t c = 0; c < kClientsPerTenant; ++c) {
    // Clients are started round-robin across tenants so that no tenant gets
    // a head start of a whole burst.
    for (std::size_t t = 0; t < tenants.size(); ++t) {
      asio::co_spawn(ex, client(tenants[t], t, jobs, queue_wait_ns, completed),
                     [&threw, &finished](std::exception_ptr e) {
                       if (e) threw.store(true, std::memory_order_relaxed);
                       finished.arrive();
                     });
    }
  }
  co_await finished.wait();
  out.wall_ns = now_ns() - start;
  out.completed = completed.load();
  out.any_threw = threw.load(std::memory_order_relaxed);
}

}  // namespace

int main(int argc, char** argv) {
  return guarded_main(kWorkload, [&] {
    const std::size_t jobs = parse_n(argc, argv, kWorkload, kDefaultJobsPerTenant);
    asio::io_context ioc(kThreads);
    std::deque<limiter> tenants;  // limiters hold a channel: not movable, so no vector
    for (std::size_t t = 0; t < kTenants; ++t) tenants.emplace_back(ioc.get_executor());
    std::vector<std::int64_t> queue_wait_ns(kTenants * jobs, -1);
    outcome out;
    run_root(ioc, root(tenants, jobs, queue_wait_ns, out));

    if (out.any_threw) fail(kWorkload, "a client completed with an exception");
    std::size_t rejected = 0;
    for (const auto& t : tenants) {
      rejected += t.rejected();
      if (t.over_limit()) fail(kWorkload, "a tenant ran more than max_concurrency jobs at once");
      if (t.bad_release()) fail(kWorkload, "a release found no slot taken");
    }
    if (rejected != 0) fail(kWorkload, std::to_string(rejected) + " jobs rejected");
    if (out.completed != kTenants * jobs)
      fail(kWorkload, std::to_string(out.completed) + " jobs ran, expected " +
                          std::to_string(kTenants * jobs));

    const double p99 = static_cast<double>(percentile(queue_wait_ns, 99.0)) / 1e3;
    json_line(kWorkload)
        .num("jobs_per_s", static_cast<double>(kTenants * jobs) * 1e9 / static_cast<double>(out.wall_ns))
        .num("queue_wait_p99_us", p99)
        .integer("rss_kb", peak_rss_kb())
        .integer("n", static_cast<long long>(jobs))
        .print();
  });
}
