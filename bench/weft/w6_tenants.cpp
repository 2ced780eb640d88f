// bench/weft/w6_tenants.cpp — W6 (defined in bench/README.md) on weft: 100
// tenants behind one weft::tenants with max_concurrency 4 and max_queue 50
// each, 1,000 jobs per tenant (`--n`), a job being a coroutine that yields
// once. Each tenant's jobs come from 54 (= 4 + 50) client coroutines that
// submit their next job when the previous one returns, started round-robin
// across tenants, so every tenant is saturated but never over its limit.
//
// Checks: every job ran, none was refused, no tenant ever ran more than 4 at
// once, and every tenant was removed at the end. Figures: jobs_per_s (all
// jobs / wall of the whole run), queue_wait_p99_us (submit to job start,
// nearest-rank p99), and overhead_vs_spawn: this run's wall divided by the
// wall of the same clients running the same jobs through a bare spawn + join
// instead of the tenants (1.0 = the same cost per job, 2.0 = twice). For
// context, overhead_vs_inline divides by the wall of the clients awaiting
// the jobs directly (no tenants, no spawn): what admission itself costs.
//
// Method: one unmeasured pass of each variant first, so that the measured
// passes find the allocator and the loops warm; then the tenants, spawn and
// inline passes, each timed around the whole run only. A coordinator job
// runs inside its caller's task, so the tenants pass makes no task per job;
// the spawn pass makes one.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <weft/coordinator.hpp>
#include <weft/weft.hpp>

#include "../common.hpp"

namespace {

constexpr const char* kWorkload = "W6";
constexpr std::size_t kTenants = 100;
constexpr std::size_t kDefaultJobsPerTenant = 1'000;
constexpr std::size_t kMaxConcurrency = 4;
constexpr std::size_t kMaxQueue = 50;
constexpr std::size_t kClientsPerTenant = kMaxConcurrency + kMaxQueue;

struct tenant_book {
  std::string name;
  std::atomic<std::size_t> next_job{0};  // hands out this tenant's job indices to its clients
  std::atomic<std::size_t> running{0};
  std::atomic<bool> over_limit{false};
};

struct run_state {
  std::size_t jobs_per_tenant;
  std::vector<std::unique_ptr<tenant_book>> books;
  std::vector<std::int64_t> queue_wait_ns;
  std::atomic<std::size_t> completed{0}, refused{0}, failed{0};

  explicit run_state(std::size_t jobs) : jobs_per_tenant(jobs), queue_wait_ns(kTenants * jobs, -1) {
    for (std::size_t t = 0; t < kTenants; ++t) {
      books.push_back(std::make_unique<tenant_book>());
      books.back()->name = "tenant-" + std::to_string(t);
    }
  }
};

// The job: counts itself running in its tenant, yields once, and returns.
weft::task<void> the_job(tenant_book& book, std::atomic<std::size_t>& completed, std::int64_t submitted,
                         std::int64_t& wait_ns) {
  wait_ns = bench::now_ns() - submitted;
  if (book.running.fetch_add(1, std::memory_order_relaxed) + 1 > kMaxConcurrency)
    book.over_limit.store(true, std::memory_order_relaxed);
  co_await weft::yield();
  book.running.fetch_sub(1, std::memory_order_relaxed);
  completed.fetch_add(1, std::memory_order_relaxed);
}

weft::task<void> tenants_client(weft::tenants& ts, run_state& st, std::size_t t) {
  tenant_book& book = *st.books[t];
  for (std::size_t j; (j = book.next_job.fetch_add(1, std::memory_order_relaxed)) < st.jobs_per_tenant;) {
    std::int64_t& wait = st.queue_wait_ns[t * st.jobs_per_tenant + j];
    const std::int64_t submitted = bench::now_ns();
    try {
      co_await ts.execute(book.name, [&book, &st, submitted, &wait] {
        return the_job(book, st.completed, submitted, wait);
      });
    } catch (const weft::too_many_tasks&) {
      st.refused.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

weft::task<void> spawn_client(run_state& st, std::size_t t) {
  tenant_book& book = *st.books[t];
  for (std::size_t j; (j = book.next_job.fetch_add(1, std::memory_order_relaxed)) < st.jobs_per_tenant;) {
    std::int64_t& wait = st.queue_wait_ns[t * st.jobs_per_tenant + j];
    co_await weft::spawn(the_job(book, st.completed, bench::now_ns(), wait));
  }
}

weft::task<void> inline_client(run_state& st, std::size_t t) {
  tenant_book& book = *st.books[t];
  for (std::size_t j; (j = book.next_job.fetch_add(1, std::memory_order_relaxed)) < st.jobs_per_tenant;) {
    std::int64_t& wait = st.queue_wait_ns[t * st.jobs_per_tenant + j];
    co_await the_job(book, st.completed, bench::now_ns(), wait);
  }
}

// Starts the clients round-robin across tenants and waits for all of them.
template <class Client>
weft::task<std::int64_t> drive(Client client) {
  std::vector<weft::join_handle<void>> clients;
  clients.reserve(kTenants * kClientsPerTenant);
  const std::int64_t start = bench::now_ns();
  for (std::size_t c = 0; c < kClientsPerTenant; ++c)
    for (std::size_t t = 0; t < kTenants; ++t) clients.push_back(weft::spawn(client(t)));
  for (auto& h : clients) co_await h;
  co_return bench::now_ns() - start;
}

struct pass {
  std::int64_t wall_ns = 0;
  std::unique_ptr<run_state> st;
};

void check(const run_state& st, const char* variant, bool limited) {
  const std::size_t expected = kTenants * st.jobs_per_tenant;
  if (st.refused != 0)
    bench::fail("weft", kWorkload, std::string(variant) + ": " + std::to_string(st.refused.load()) + " jobs refused");
  if (st.completed != expected)
    bench::fail("weft", kWorkload,
                std::string(variant) + ": " + std::to_string(st.completed.load()) + " jobs ran, expected " +
                    std::to_string(expected));
  for (const auto& b : st.books)
    if (limited && b->over_limit) bench::fail("weft", kWorkload, std::string(variant) + ": a tenant ran more than 4 jobs at once");
}

pass run_tenants(weft::runtime& rt, std::size_t jobs) {
  pass p{0, std::make_unique<run_state>(jobs)};
  weft::coordinator_options per_tenant;
  per_tenant.max_concurrency = kMaxConcurrency;
  per_tenant.max_queue = kMaxQueue;
  weft::tenants ts(per_tenant);
  run_state& st = *p.st;
  p.wall_ns = rt.block_on(drive([&ts, &st](std::size_t t) { return tenants_client(ts, st, t); }));
  check(st, "tenants", true);
  if (ts.size() != 0)
    bench::fail("weft", kWorkload, std::to_string(ts.size()) + " tenants still present after every job finished");
  return p;
}

pass run_spawn(weft::runtime& rt, std::size_t jobs) {
  pass p{0, std::make_unique<run_state>(jobs)};
  run_state& st = *p.st;
  p.wall_ns = rt.block_on(drive([&st](std::size_t t) { return spawn_client(st, t); }));
  check(st, "spawn", false);
  return p;
}

pass run_inline(weft::runtime& rt, std::size_t jobs) {
  pass p{0, std::make_unique<run_state>(jobs)};
  run_state& st = *p.st;
  p.wall_ns = rt.block_on(drive([&st](std::size_t t) { return inline_client(st, t); }));
  check(st, "inline", false);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t jobs = bench::parse_n(argc, argv, kDefaultJobsPerTenant);
  weft::runtime_options o;
  o.loops = 2;
  weft::runtime rt(o);

  run_tenants(rt, jobs);  // warm-up passes, unmeasured
  run_spawn(rt, jobs);
  run_inline(rt, jobs);
  pass coordinated = run_tenants(rt, jobs);
  const long rss_kb = bench::peak_rss_kb();
  pass bare = run_spawn(rt, jobs);
  pass direct = run_inline(rt, jobs);

  const double total = static_cast<double>(kTenants * jobs);
  const double p99_us = static_cast<double>(bench::percentile(coordinated.st->queue_wait_ns, 99.0)) / 1e3;
  bench::json_line("weft", kWorkload)
      .num("jobs_per_s", total * 1e9 / static_cast<double>(coordinated.wall_ns))
      .num("queue_wait_p99_us", p99_us)
      .num("spawn_jobs_per_s", total * 1e9 / static_cast<double>(bare.wall_ns))
      .num("overhead_vs_spawn", static_cast<double>(coordinated.wall_ns) / static_cast<double>(bare.wall_ns))
      .num("inline_jobs_per_s", total * 1e9 / static_cast<double>(direct.wall_ns))
      .num("overhead_vs_inline", static_cast<double>(coordinated.wall_ns) / static_cast<double>(direct.wall_ns))
      .num("rss_kb", static_cast<double>(rss_kb))
      .num("n", static_cast<double>(jobs))
      .print();
}
