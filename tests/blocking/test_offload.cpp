// tests/blocking/test_offload.cpp — the coroutine side of the blocking pool: run() and
// offload() from tasks on a runtime, resumption on the awaiting loop, errors,
// and cancellation of queued and running offloads (either the job ran or it
// was withdrawn, never both or neither, and exactly one wake).
//
// Orderings are forced with gates and latches; timed waits only catch hangs.
#include <weft/bounded_elastic.hpp>
#include <weft/offload.hpp>
#include <weft/weft.hpp>

#include <doctest/doctest.h>

#include "never.hpp"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <latch>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pool_support.hpp"
#include "stop_probe.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using namespace weft;

// Spawned coroutine lambdas are named (`auto body = [&]() -> task<...>`) so
// the closure, which the coroutine reads its captures through, outlives the
// task; a temporary closure would be gone before the spawned task runs.

using test::gate;
using test::occupy;
using test::this_thread_name;

using test::eventually;
using test::outcome_of;

namespace {

constexpr auto hang_limit = 10s;

runtime_options two_loops() {
  runtime_options o;
  o.loops = 2;
  return o;
}

elastic_options pool_of(unsigned threads, std::size_t queue = 100, rejection_policy p = rejection_policy::abort) {
  elastic_options o;
  o.max_threads = threads;
  o.max_queued_per_thread = queue;
  o.on_reject = p;
  o.name = "offload-test";
  return o;
}





// Threads of this process whose name starts with `prefix`.
int threads_named(const std::string& prefix) {
  int n = 0;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(t.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind(prefix, 0) == 0) ++n;
  }
  return n;
}

struct custom_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace

TEST_SUITE("offload") {

TEST_CASE("offload runs on a pool thread and resumes the task on its own loop") {
  runtime rt(test::loops(1));  // one loop: with more, an idle peer may take the woken task
  struct seen {
    std::thread::id before, after;
    std::string job_thread;
    int value = 0;
  };
  auto s = rt.block_on([]() -> task<seen> {
    seen r;
    r.before = std::this_thread::get_id();
    r.value = co_await offload([&r] {
      r.job_thread = this_thread_name();
      return 41 + 1;
    });
    r.after = std::this_thread::get_id();
    co_return r;
  }());
  CHECK(s.value == 42);
  CHECK(s.before == s.after);
  CHECK(s.job_thread.rfind("weft-elastic-", 0) == 0);
}

TEST_CASE("exceptions come back through run and offload") {
  runtime rt(two_loops());
  bounded_elastic pool(pool_of(2));
  CHECK_THROWS_AS(rt.block_on([&]() -> task<int> {
    co_return co_await pool.run([]() -> int { throw custom_error("from run"); });
  }()),
                  custom_error);
  CHECK_THROWS_AS(rt.block_on([]() -> task<void> { co_await offload([] { throw custom_error("from offload"); }); }()),
                  custom_error);
  // The worker survived both.
  CHECK(rt.block_on([&]() -> task<int> { co_return co_await pool.run([] { return 3; }); }()) == 3);
}

TEST_CASE("run and offload take move-only callables and return move-only values") {
  runtime rt(two_loops());
  auto v = rt.block_on([]() -> task<std::unique_ptr<int>> {
    // Named, then moved: GCC 12 destroys a lambda temporary's init-captures
    // twice when the lambda is created inside a co_await expression.
    auto add_one = [p = std::make_unique<int>(20)] { return std::make_unique<int>(*p + 1); };
    co_return co_await offload(std::move(add_one));
  }());
  CHECK(*v == 21);
}

TEST_CASE("offload off a loop thread throws logic_error pointing at submit") {
  runtime rt(two_loops());
  std::string msg;
  try {
    (void)offload([] {});
  } catch (const std::logic_error& e) {
    msg = e.what();
  }
  CHECK(msg.find("submit") != std::string::npos);
}

TEST_CASE("a runtime that never offloads starts no pool thread") {
  runtime_options o = two_loops();
  o.blocking.name = "lazy-pool";
  runtime rt(o);
  rt.block_on([]() -> task<void> { co_return; }());
  CHECK(threads_named("lazy-pool") == 0);
  CHECK(rt.blocking().stats().largest_pool_size == 0);
  rt.block_on([]() -> task<void> { co_await offload([] {}); }());
  CHECK(threads_named("lazy-pool") == 1);
}

TEST_CASE("cancelling a queued offload withdraws it: it never runs and the task wakes at once") {
  runtime rt(two_loops());
  bounded_elastic pool(pool_of(1));
  gate g;
  occupy(pool, g);
  std::atomic<bool> ran{false};
  auto body = [&]() -> task<void> { co_await pool.run([&] { ran = true; }); };
  auto h = rt.spawn(body());
  REQUIRE(eventually([&] { return pool.stats().queued == 1; }));
  h.cancel();
  // The worker is still blocked, so only the withdrawal can have woken the task.
  CHECK(outcome_of(h) == "cancelled");
  auto s = pool.stats();
  CHECK(s.queued == 0);
  CHECK(s.withdrawn == 1);
  g.open();
  pool.shutdown();
  REQUIRE(pool.await_termination(hang_limit));
  CHECK_FALSE(ran);
  s = pool.stats();
  CHECK(s.completed == 1);  // the occupier; the withdrawn job is not completed
  CHECK(s.submitted == s.completed + s.withdrawn + s.queued + s.active);
}

TEST_CASE("cancelling a running offload asks it to stop and awaits it before the task stops") {
  runtime rt(two_loops());
  bounded_elastic pool(pool_of(1));
  std::latch started(1);
  std::atomic<bool> job_done{false}, saw_stop{false}, done_before_throw{false};
  auto body = [&]() -> task<void> {
    test::at_exit frame_goes{[&] { done_before_throw = job_done.load(); }};
    co_await pool.run([&](std::stop_token st) {
      started.count_down();
      const auto end = std::chrono::steady_clock::now() + hang_limit;
      while (!st.stop_requested() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(100us);
      saw_stop = st.stop_requested();
      job_done = true;
    });
  };
  auto h = rt.spawn(body());
  started.wait();
  h.cancel();
  CHECK(outcome_of(h) == "cancelled");
  CHECK(saw_stop);
  CHECK(done_before_throw);
}

TEST_CASE("a running job without a stop_token is still awaited before the task stops") {
  runtime rt(two_loops());
  bounded_elastic pool(pool_of(1));
  gate g;
  std::latch started(1);
  std::atomic<bool> job_done{false}, done_before_throw{false};
  auto body = [&]() -> task<int> {
    int local = 0;  // the job writes to the frame: it must not be gone while the job runs
    test::at_exit frame_goes{[&] { done_before_throw = job_done.load() && local == 7; }};
    auto blocks = [&, w = g.waiter()] {  // named: see the GCC 12 note above
      started.count_down();
      w();
      local = 7;
      job_done = true;
    };
    co_await pool.run(std::move(blocks));
    co_return local;
  };
  auto h = rt.spawn(body());
  started.wait();
  h.cancel();
  g.open();
  CHECK(outcome_of(h) == "cancelled");
  CHECK(done_before_throw);
}

TEST_CASE("an already cancelled task does not submit its offload") {
  runtime rt(two_loops());
  bounded_elastic pool(pool_of(1));
  std::atomic<bool> ran{false};
  auto body = [&]() -> task<void> {
    try {
      co_await never{};
    } catch (const cancelled&) {
    }
    co_await pool.run([&] { ran = true; });
  };
  auto h = rt.spawn(body());
  h.cancel();  // whenever it lands, the cancellation is sticky: run() must see it
  CHECK(outcome_of(h) == "cancelled");
  CHECK_FALSE(ran);
  CHECK(pool.stats().submitted == 0);
}

TEST_CASE("an awaited job evicted by discard_oldest completes its await with rejected_execution") {
  runtime rt(two_loops());
  bounded_elastic pool(pool_of(1, 1, rejection_policy::discard_oldest));
  gate g;
  occupy(pool, g);
  std::atomic<bool> ran{false};
  auto body = [&]() -> task<void> { co_await pool.run([&] { ran = true; }); };
  auto h = rt.spawn(body());
  REQUIRE(eventually([&] { return pool.stats().queued == 1; }));
  pool.execute([] {});  // evicts the awaited job
  CHECK(outcome_of(h).find("rejected: ") == 0);
  g.open();
  pool.shutdown();
  REQUIRE(pool.await_termination(hang_limit));
  CHECK_FALSE(ran);
}

TEST_CASE("caller_runs on a loop thread runs the job inline, without suspending") {
  runtime rt(two_loops());
  bounded_elastic pool(pool_of(1, 1, rejection_policy::caller_runs));
  gate g;
  occupy(pool, g);
  pool.execute([] {});  // fills the only queue
  auto same = rt.block_on([&]() -> task<bool> {
    const auto loop = std::this_thread::get_id();
    auto job_thread = co_await pool.run([] { return std::this_thread::get_id(); });
    co_return job_thread == loop;
  }());
  CHECK(same);
  g.open();
}

TEST_CASE("awaited jobs handed back by shutdown_now: dropped ones reject, run ones deliver") {
  runtime rt(two_loops());
  auto pool = std::make_unique<bounded_elastic>(pool_of(1));
  gate g;
  occupy(*pool, g);
  auto body = [&](int v) -> task<int> { co_return co_await pool->run([v] { return v; }); };
  auto dropped = rt.spawn(body(1));
  auto kept = rt.spawn(body(2));
  auto cancelled_later = rt.spawn(body(3));
  REQUIRE(eventually([&] { return pool->stats().queued == 3; }));
  std::vector<job> unrun = pool->shutdown_now();
  REQUIRE(unrun.size() == 3);
  g.open();
  pool.reset();  // the pool is gone while its awaiters still wait on the handed-back jobs

  // Cancelling while the job sits with its holder must neither wake the task
  // nor touch the destroyed pool: the drop (or run) below is the one wake.
  cancelled_later.cancel();
  CHECK_FALSE(cancelled_later.done());
  // The jobs were queued in the order the tasks reached the pool, which is
  // not the spawn order: find each by running the ones we keep.
  unrun[0] = job{};  // drop one
  unrun[1]();        // run one
  unrun.clear();     // drop the third
  std::vector<std::string> outcomes{outcome_of(dropped), outcome_of(kept), outcome_of(cancelled_later)};
  int values = 0, rejected = 0, cancels = 0;
  for (auto& o : outcomes) {
    values += o == "value";
    rejected += o.rfind("rejected: ", 0) == 0;
    cancels += o == "cancelled";
  }
  CHECK(cancels == 1);
  CHECK(values + rejected == 2);
  CHECK(values <= 1);
}

TEST_CASE("many tasks offloading concurrently each get their own result back") {
  runtime rt(two_loops());
  bounded_elastic pool(pool_of(4));
  constexpr int tasks = 200, rounds = 20;
  std::vector<join_handle<long>> hs;
  auto body = [&pool](int t) -> task<long> {
    long sum = 0;
    for (int r = 0; r < rounds; ++r) sum += co_await pool.run([t, r] { return long(t) * 1000 + r; });
    co_return sum;
  };
  for (int t = 0; t < tasks; ++t) {
    hs.push_back(rt.spawn(body(t)));
  }
  for (int t = 0; t < tasks; ++t) {
    CHECK(hs[t].join_blocking() == long(t) * 1000 * rounds + rounds * (rounds - 1) / 2);
  }
}

TEST_CASE("completion racing cancellation: each offload either ran or was withdrawn, and every task ends") {
  runtime rt(two_loops());
  bounded_elastic pool(pool_of(2, 1000));
  constexpr int tasks = 300;
  std::atomic<int> ran{0};
  std::vector<join_handle<void>> hs;
  auto body = [&]() -> task<void> {
    co_await pool.run([&] {
      ++ran;
      const auto end = std::chrono::steady_clock::now() + 20us;
      while (std::chrono::steady_clock::now() < end) {
      }
    });
  };
  for (int t = 0; t < tasks; ++t) {
    hs.push_back(rt.spawn(body()));
  }
  for (int t = 0; t < tasks; t += 2) hs[t].cancel();
  int values = 0, cancels = 0;
  for (auto& h : hs) {
    auto o = outcome_of(h);
    values += o == "value";
    cancels += o == "cancelled";
  }
  CHECK(values + cancels == tasks);
  CHECK(cancels <= tasks / 2);
  pool.shutdown();
  REQUIRE(pool.await_termination(hang_limit));
  auto s = pool.stats();
  // Ran (completed) + withdrawn covers every submit.
  CHECK(s.completed == static_cast<std::uint64_t>(ran.load()));
  CHECK(s.submitted == s.completed + s.withdrawn + s.queued + s.active);
  CHECK(s.submitted <= static_cast<std::uint64_t>(tasks));  // a task cancelled before its await submits nothing
  CHECK(s.queued + s.active == 0);
}

}  // TEST_SUITE

TEST_CASE("runtimes destroyed right after their last wake from a pool that outlives them: no use of a freed loop") {
  // The pool thread finishes the job, posts the wake and kicks the loop; the
  // task may end, block_on return and the runtime go before the kick is
  // done. The runtime waits for such wakers before its loops go (ASan and
  // TSan see a freed loop or a closed eventfd otherwise).
  bounded_elastic pool(pool_of(2));
  const int rounds = test::sanitized ? 300 : 2000;
  int ok = 0;
  for (int i = 0; i < rounds; ++i) {
    runtime rt(two_loops());
    auto job = [i] { return i; };
    ok += rt.block_on([](bounded_elastic& p, decltype(job) j) -> task<int> { co_return co_await p.run(std::move(j)); }(pool, job)) == i;
  }
  CHECK(ok == rounds);
}
