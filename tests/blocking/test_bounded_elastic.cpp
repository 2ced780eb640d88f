// tests/blocking/test_bounded_elastic.cpp — the bounded elastic pool from plain threads:
// placement, caps, eviction, policies, lifecycle, figures and faults. (The
// coroutine side, run()/offload() on a runtime, is in test_offload.cpp.)
//
// Jobs block on gates the test opens, so every ordering below is forced, not
// hoped for; timed waits are upper bounds that only catch a hang. The pool's
// private structures (lib/blocking/load_tree.hpp, lib/blocking/elastic_backlog.hpp,
// lib/blocking/idle_stack.hpp, and all of the core through elastic_audit) are checked
// here too: against a scan or a plain model, and under concurrent stress
// (run these under TSan).
#include <weft/bounded_elastic.hpp>

#include <doctest/doctest.h>

#include "counted.hpp"
#include "blocking/elastic_core.hpp"
#include "blocking/elastic_backlog.hpp"
#include "blocking/idle_stack.hpp"
#include "blocking/load_tree.hpp"

#include <pthread.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <future>
#include <latch>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pool_support.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using weft::bounded_elastic;
using weft::elastic_options;
using weft::pool_state;
using weft::rejection_policy;

using test::gate;
using test::occupy;
using test::this_thread_name;

using test::eventually;

namespace {

constexpr auto hang_limit = 10s;  // only ever an upper bound: reaching it is a failure




template <class T>
bool ready(std::future<T>& f) {
  return f.wait_for(hang_limit) == std::future_status::ready;
}


elastic_options small(unsigned threads, std::size_t queue = 100, rejection_policy p = rejection_policy::abort) {
  elastic_options o;
  o.max_threads = threads;
  o.max_queued_per_thread = queue;
  o.on_reject = p;
  return o;
}

// The invariant of elastic_stats at quiescence; `evicted`: jobs that
// discard_oldest dropped from the queue.
void check_consistent(const weft::elastic_stats& s, std::uint64_t evicted = 0) {
  CHECK(s.submitted == s.completed + s.withdrawn + s.returned + s.queued + s.active + evicted);
}

template <class E>
std::string what_of(std::future<void>& f) {
  try {
    f.get();
  } catch (const E& e) {
    return e.what();
  }
  return "<no exception>";
}

}  // namespace

TEST_SUITE("bounded_elastic") {

TEST_CASE("bad options throw invalid_argument naming the option") {
  auto message = [](elastic_options o) -> std::string {
    try {
      bounded_elastic pool(std::move(o));
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "<constructed>";
  };
  elastic_options o;
  o.max_threads = 0;
  CHECK(message(o).find("max_threads") != std::string::npos);
  o = {};
  o.max_queued_per_thread = 0;
  CHECK(message(o).find("max_queued_per_thread") != std::string::npos);
  o = {};
  o.ttl = 0ms;
  CHECK(message(o).find("ttl") != std::string::npos);
  o = {};
  o.ttl = -5ms;
  CHECK(message(o).find("ttl") != std::string::npos);
  o = {};
  o.max_threads = 2;
  o.core_threads = 3;
  CHECK(message(o).find("core_threads") != std::string::npos);
}

TEST_CASE("a new pool starts no thread and terminates at once when shut down") {
  bounded_elastic pool(small(4));
  CHECK(pool.stats().pool_size == 0);
  CHECK(pool.state() == pool_state::running);
  CHECK_FALSE(pool.is_shutdown());
  pool.shutdown();
  CHECK(pool.is_shutdown());
  CHECK(pool.is_terminated());
  CHECK(pool.await_termination(0ns));
}

TEST_CASE("submit carries the value and the exception through the future") {
  bounded_elastic pool(small(2));
  auto v = pool.submit([] { return 42; });
  REQUIRE(ready(v));
  CHECK(v.get() == 42);
  // Shared and kept past the pool's end, so the last reference to the
  // exception is dropped here: TSan cannot see libstdc++'s (uninstrumented)
  // exception refcount, and would report a worker freeing it as a race.
  std::shared_future<int> e = pool.submit([]() -> int { throw std::out_of_range("boom"); }).share();
  REQUIRE(e.wait_for(hang_limit) == std::future_status::ready);
  CHECK_THROWS_AS(e.get(), std::out_of_range);
  pool.shutdown();
  REQUIRE(pool.await_termination(hang_limit));
}

TEST_CASE("move-only callables and results are accepted everywhere") {
  bounded_elastic pool(small(2));
  auto p = std::make_unique<int>(7);
  auto f = pool.submit([p = std::move(p)] { return std::make_unique<int>(*p * 6); });
  REQUIRE(ready(f));
  CHECK(*f.get() == 42);

  std::promise<int> done;
  auto got = done.get_future();
  pool.execute([q = std::make_unique<int>(5), d = std::move(done)]() mutable { d.set_value(*q); });
  REQUIRE(ready(got));
  CHECK(got.get() == 5);

  weft::job j([r = std::make_unique<int>(1)] { CHECK(*r == 1); });
  std::promise<void> ran;
  auto ran_f = ran.get_future();
  pool.execute(weft::job([r = std::move(ran)]() mutable { r.set_value(); }));
  REQUIRE(ready(ran_f));
}

TEST_CASE("a job runs at most once, and an empty job throws bad_function_call") {
  int runs = 0;
  weft::job j([&] { ++runs; });
  CHECK(static_cast<bool>(j));
  j();
  CHECK(runs == 1);
  CHECK_FALSE(static_cast<bool>(j));
  CHECK_THROWS_AS(j(), std::bad_function_call);
  CHECK(runs == 1);

  std::stop_source src;
  src.request_stop();
  bool saw_stop = false;
  weft::job s([&](std::stop_token st) { saw_stop = st.stop_requested(); });
  s(src.get_token());
  CHECK(saw_stop);
}

TEST_CASE("a job's callable is destroyed exactly once, run or not") {
  counted::reset();
  {
    weft::job unrun([c = counted{}] { (void)c; });
    weft::job ran([c = counted{}] { (void)c; });
    ran();
    weft::job moved = std::move(unrun);
  }
  CHECK(counted::alive() == 0);
  {
    bounded_elastic pool(small(1));
    for (int i = 0; i < 10; ++i) pool.execute([c = counted{}] { (void)c; });
  }
  CHECK(counted::alive() == 0);
}

TEST_CASE("threads are named NAME-N, the name cut to fit 15 characters") {
  elastic_options o = small(2);
  o.name = "io";
  bounded_elastic pool(o);
  auto n = pool.submit(this_thread_name);
  REQUIRE(ready(n));
  CHECK(n.get() == "io-1");

  elastic_options l = small(2);
  l.name = "a-very-long-pool-name";
  bounded_elastic longer(l);
  auto m = longer.submit(this_thread_name);
  REQUIRE(ready(m));
  CHECK(m.get() == "a-very-long-p-1");  // 13 + "-1" = 15
}

TEST_CASE("a submit to an idle pool reuses the idle worker instead of starting a thread") {
  bounded_elastic pool(small(4));
  for (int i = 0; i < 20; ++i) {
    auto f = pool.submit([] {});
    REQUIRE(ready(f));
    f.get();
  }
  auto s = pool.stats();
  CHECK(s.largest_pool_size == 1);
  CHECK(s.pool_size == 1);
  CHECK(s.idle == 1);
  CHECK(s.completed == 20);
}

TEST_CASE("pick order: an idle worker, then a new one below the cap, then the least busy") {
  bounded_elastic pool(small(2));
  gate a, b;
  std::latch started(2);
  std::thread::id ta, tb;
  pool.execute([&, w = a.waiter()] {
    ta = std::this_thread::get_id();
    started.count_down();
    w();
  });
  pool.execute([&, w = b.waiter()] {
    tb = std::this_thread::get_id();
    started.count_down();
    w();
  });
  started.wait();
  CHECK(ta != tb);  // no idle worker: the second job started a second thread
  CHECK(pool.stats().pool_size == 2);

  // At the cap: four more jobs are spread over both queues (least busy), not
  // piled onto one. B's worker then runs its own share first and steals the
  // rest from A's worker, which is still blocked.
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::future<void>> done;
  for (int i = 0; i < 4; ++i) {
    done.push_back(pool.submit([&, i] {
      std::lock_guard lk(mu);
      order.push_back(i);
      CHECK(std::this_thread::get_id() == tb);
    }));
  }
  CHECK(pool.stats().queued == 4);
  b.open();
  for (auto& f : done) REQUIRE(ready(f));
  // Balanced queues give {0,2 | 1,3}: B's worker runs its own two, then the
  // other two oldest first. One queue holding all four would give 0,1,2,3.
  const bool b_had_even = order == std::vector<int>{0, 2, 1, 3};
  const bool b_had_odd = order == std::vector<int>{1, 3, 0, 2};
  CHECK((b_had_even || b_had_odd));
  a.open();
  CHECK(eventually([&] { return pool.stats().idle == 2; }));

  // Both idle now: the next job goes to an idle worker, no thread is started.
  auto f = pool.submit([] {});
  REQUIRE(ready(f));
  CHECK(pool.stats().largest_pool_size == 2);
}

TEST_CASE("a burst of jobs handed to sleeping workers wakes every one of them") {
  // Eight workers go to sleep; then eight jobs that can only finish when all
  // eight run at once. The submitter wakes the first, and each woken worker
  // the next: a lost wake anywhere in the chain would leave the burst hung.
  constexpr int n = 8;
  bounded_elastic pool(small(n));
  for (int round = 0; round < 20; ++round) {
    std::latch all_running(n);
    std::vector<std::future<bool>> jobs;
    for (int i = 0; i < n; ++i) {
      jobs.push_back(pool.submit([&all_running] {
        all_running.count_down();
        const auto end = std::chrono::steady_clock::now() + hang_limit;
        while (!all_running.try_wait()) {
          if (std::chrono::steady_clock::now() > end) return false;
          std::this_thread::sleep_for(50us);
        }
        return true;
      }));
    }
    for (auto& j : jobs) {
      REQUIRE(ready(j));
      CHECK(j.get());
    }
    REQUIRE(eventually([&] { return pool.stats().idle == static_cast<std::size_t>(n); }));
  }
  CHECK(pool.stats().largest_pool_size == static_cast<std::size_t>(n));
}

TEST_CASE("the thread cap holds under 10,000 concurrent submits from several threads") {
  constexpr unsigned cap = 4;
  bounded_elastic pool(small(cap, 100'000));
  std::atomic<int> running{0}, most{0}, ran{0};
  std::mutex mu;
  std::set<std::thread::id> threads;
  std::vector<std::thread> submitters;
  for (int t = 0; t < 4; ++t) {
    submitters.emplace_back([&] {
      for (int i = 0; i < 2'500; ++i) {
        pool.execute([&] {
          int now = ++running;
          int m = most.load();
          while (now > m && !most.compare_exchange_weak(m, now)) {
          }
          {
            std::lock_guard lk(mu);
            threads.insert(std::this_thread::get_id());
          }
          ++ran;
          --running;
        });
        CHECK(pool.stats().pool_size <= cap);
      }
    });
  }
  for (auto& t : submitters) t.join();
  pool.shutdown();
  REQUIRE(pool.await_termination(hang_limit));
  CHECK(ran == 10'000);
  CHECK(most <= static_cast<int>(cap));
  CHECK(threads.size() <= cap);
  auto s = pool.stats();
  CHECK(s.largest_pool_size <= cap);
  CHECK(s.completed == 10'000);
  check_consistent(s);
}

TEST_CASE("no head-of-line blocking: short jobs do not wait behind a long one") {
  bounded_elastic pool(small(2));
  const auto start = std::chrono::steady_clock::now();
  std::atomic<std::int64_t> long_done_ms{-1};
  std::atomic<std::int64_t> shorts_done_ms{-1};
  std::atomic<int> shorts{0};
  auto ms_since_start = [start] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  };
  auto long_job = pool.submit([&] {
    std::this_thread::sleep_for(500ms);
    long_done_ms = ms_since_start();
  });
  std::vector<std::future<void>> short_jobs;
  for (int i = 0; i < 10; ++i) {
    short_jobs.push_back(pool.submit([&] {
      std::this_thread::sleep_for(1ms);
      if (++shorts == 10) shorts_done_ms = ms_since_start();
    }));
  }
  for (auto& f : short_jobs) REQUIRE(ready(f));
  REQUIRE(ready(long_job));
  MESSAGE("shorts done at " << shorts_done_ms.load() << " ms, long at " << long_done_ms.load() << " ms");
  CHECK(shorts_done_ms.load() < long_done_ms.load());
  CHECK(shorts_done_ms.load() < 250);  // ten 1 ms jobs on one free worker; the long one takes 500
}

TEST_CASE("abort rejects with Reactor's message when every queue is full") {
  bounded_elastic pool(small(1, 2));
  gate g;
  occupy(pool, g);  // running
  pool.execute([] {});       // queued 1/2
  pool.execute([] {});       // queued 2/2
  std::string msg;
  try {
    pool.execute([] {});
  } catch (const weft::rejected_execution& e) {
    msg = e.what();
  }
  CHECK(msg == "Task capacity of bounded elastic scheduler reached while scheduling 1 tasks (3/2)");
  CHECK_THROWS_AS(pool.submit([] {}), weft::rejected_execution);
  g.open();
  pool.shutdown();
  REQUIRE(pool.await_termination(hang_limit));
  auto s = pool.stats();
  CHECK(s.rejected == 2);
  CHECK(s.completed == 3);
  CHECK(s.submitted == 3);  // the two refused never count as submitted
  check_consistent(s);
}

TEST_CASE("caller_runs runs a rejected job on the submitting thread") {
  bounded_elastic pool(small(1, 1, rejection_policy::caller_runs));
  gate g;
  occupy(pool, g);
  pool.execute([] {});
  std::thread::id ran_on;
  auto f = pool.submit([&] { ran_on = std::this_thread::get_id(); });
  CHECK(f.wait_for(0s) == std::future_status::ready);  // ran synchronously, before submit returned
  CHECK(ran_on == std::this_thread::get_id());
  CHECK_THROWS_AS(pool.execute([] { throw std::runtime_error("mine"); }), std::runtime_error);
  g.open();
}

TEST_CASE("discard drops the new job and its future gets rejected_execution") {
  bounded_elastic pool(small(1, 1, rejection_policy::discard));
  gate g;
  std::atomic<int> ran{0};
  occupy(pool, g);
  auto kept = pool.submit([&] { ++ran; });
  auto dropped = pool.submit([&] { ran += 100; });
  REQUIRE(ready(dropped));
  CHECK(what_of<weft::rejected_execution>(dropped).find("discarded") != std::string::npos);
  g.open();
  REQUIRE(ready(kept));
  pool.shutdown();
  REQUIRE(pool.await_termination(hang_limit));
  CHECK(ran == 1);
  check_consistent(pool.stats());
}

TEST_CASE("discard_oldest evicts the oldest queued job, whose future gets rejected_execution") {
  bounded_elastic pool(small(1, 2, rejection_policy::discard_oldest));
  gate g;
  std::mutex mu;
  std::vector<int> ran;
  auto record = [&](int i) {
    return [&, i] {
      std::lock_guard lk(mu);
      ran.push_back(i);
    };
  };
  occupy(pool, g);
  auto oldest = pool.submit(record(1));
  auto second = pool.submit(record(2));
  auto newest = pool.submit(record(3));
  REQUIRE(ready(oldest));
  CHECK(what_of<weft::rejected_execution>(oldest).find("discard_oldest") != std::string::npos);
  g.open();
  REQUIRE(ready(second));
  REQUIRE(ready(newest));
  CHECK(ran == std::vector<int>{2, 3});
  pool.shutdown();
  REQUIRE(pool.await_termination(hang_limit));
  auto s = pool.stats();
  CHECK(s.rejected == 1);
  CHECK(s.submitted == 4);  // the occupier and all three: each was accepted when it came
  check_consistent(s, 1);
}

TEST_CASE("discard_oldest evicts the job that has waited longest in any worker's queue") {
  // Two workers, queues of two. Java's DiscardOldestPolicy drops the head of
  // its one queue; here the oldest job may wait at either worker, and it is
  // the one dropped, not the head of the first worker's queue.
  bounded_elastic pool(small(2, 2, rejection_policy::discard_oldest));
  gate a, b, c;
  occupy(pool, a);  // the first worker
  occupy(pool, b);  // no idle worker, room for a thread: the second
  std::mutex mu;
  std::vector<int> started;
  auto job = [&](int i) {
    return [&, i, w = c.waiter()] {
      {
        std::lock_guard lk(mu);
        started.push_back(i);
      }
      w();
    };
  };
  auto started_count = [&] {
    std::lock_guard lk(mu);
    return started.size();
  };
  std::vector<std::future<void>> f(7);
  for (int i = 1; i <= 4; ++i) f[i] = pool.submit(job(i));  // two at each worker
  a.open();  // the first worker runs the oldest of its own, and blocks on c
  REQUIRE(eventually([&] { return started_count() == 1; }));
  f[5] = pool.submit(job(5));  // to the shorter queue: every queue is full again
  CHECK(pool.stats().queued == 4);
  int oldest_waiting = 0;  // the earliest submitted of those still queued
  for (int i = 1; i <= 5 && oldest_waiting == 0; ++i) {
    std::lock_guard lk(mu);
    if (std::find(started.begin(), started.end(), i) == started.end()) oldest_waiting = i;
  }
  CHECK(oldest_waiting == 2);  // job 1 ran at the first worker; job 2 waits at the second
  f[6] = pool.submit(job(6));
  REQUIRE(f[oldest_waiting].wait_for(hang_limit) == std::future_status::ready);
  CHECK(what_of<weft::rejected_execution>(f[oldest_waiting]).find("discard_oldest") != std::string::npos);
  c.open();
  b.open();
  for (int i = 1; i <= 6; ++i) {
    if (i != oldest_waiting) REQUIRE(ready(f[i]));
  }
  pool.shutdown();
  REQUIRE(pool.await_termination(hang_limit));
  std::sort(started.begin(), started.end());
  CHECK(started == std::vector<int>{1, 3, 4, 5, 6});
  const auto s = pool.stats();
  CHECK(s.rejected == 1);
  check_consistent(s, 1);
}

TEST_CASE("the run states follow ThreadPoolExecutor's: running, shutdown or stop, tidying, terminated") {
  for (const bool now : {false, true}) {
    CAPTURE(now);
    std::vector<pool_state> in_hook, polled;
    bool terminated_in_hook = true;
    std::atomic<bool> done{false}, polling{false};
    bounded_elastic pool(small(2));
    weft::detail::elastic_test_hooks hooks;
    // Where Java runs terminated(): the pool is tidying, not yet terminated.
    hooks.on_tidying = [&] {
      in_hook.push_back(pool.state());
      terminated_in_hook = pool.is_terminated();
    };
    weft::detail::elastic_set_test_hooks(pool, std::move(hooks));
    // A poller records each state it sees change to: never one out of order.
    std::thread poller([&] {
      pool_state last = pool.state();
      polled.push_back(last);
      polling = true;
      while (!done.load()) {
        if (const pool_state s = pool.state(); s != last) polled.push_back(last = s);
        std::this_thread::yield();
      }
      if (const pool_state s = pool.state(); s != last) polled.push_back(s);
    });
    // The poller's first look must come before the shutdown: a thread can
    // start late on a loaded machine (seen under ASan in a fresh chroot).
    test::wait_for([&] { return polling.load(); }, "the state poller to start");
    gate g;
    occupy(pool, g);
    if (now) {
      CHECK(pool.shutdown_now().empty());
    } else {
      pool.shutdown();
    }
    CHECK(pool.state() == (now ? pool_state::stop : pool_state::shutdown));
    g.open();
    REQUIRE(pool.await_termination(hang_limit));
    done = true;
    poller.join();
    CHECK(in_hook == std::vector<pool_state>{pool_state::tidying});
    CHECK_FALSE(terminated_in_hook);
    CHECK(std::is_sorted(polled.begin(), polled.end()));
    CHECK(polled.front() == pool_state::running);
    CHECK(polled.back() == pool_state::terminated);
  }
}

TEST_CASE("after shutdown new work follows the policy with a message that says so") {
  bounded_elastic aborting(small(2));
  aborting.shutdown();
  std::string msg;
  try {
    aborting.execute([] {});
  } catch (const weft::rejected_execution& e) {
    msg = e.what();
  }
  CHECK(msg.find("shut down") != std::string::npos);

  // Like Java's CallerRunsPolicy, a shut-down pool discards rather than runs.
  bounded_elastic caller(small(2, 10, rejection_policy::caller_runs));
  caller.shutdown();
  bool ran = false;
  auto f = caller.submit([&] { ran = true; });
  REQUIRE(ready(f));
  CHECK(what_of<weft::rejected_execution>(f).find("shut down") != std::string::npos);
  CHECK_FALSE(ran);
}

TEST_CASE("shutdown lets queued work finish; await_termination reports false, then true") {
  bounded_elastic pool(small(1));
  gate g;
  std::atomic<int> ran{0};
  occupy(pool, g);
  for (int i = 0; i < 3; ++i) pool.execute([&] { ++ran; });
  pool.shutdown();
  CHECK(pool.is_shutdown());
  CHECK(pool.state() == pool_state::shutdown);
  CHECK_FALSE(pool.await_termination(20ms));
  CHECK_FALSE(pool.is_terminated());
  g.open();
  REQUIRE(pool.await_termination(hang_limit));
  CHECK(pool.state() == pool_state::terminated);
  CHECK(ran == 3);
  auto s = pool.stats();
  CHECK(s.pool_size == 0);
  CHECK(s.completed == 4);
  check_consistent(s);
}

TEST_CASE("shutdown_now returns queued jobs unrun and asks running ones to stop") {
  bounded_elastic pool(small(1));
  std::latch running(1);
  std::atomic<bool> saw_stop{false};
  auto stopper = pool.submit([&](std::stop_token st) {
    running.count_down();
    const auto end = std::chrono::steady_clock::now() + hang_limit;
    while (!st.stop_requested() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(100us);
    saw_stop = st.stop_requested();
  });
  running.wait();
  std::atomic<int> ran{0};
  auto awaited = pool.submit([&] { ++ran; });
  pool.execute([&] { ran += 10; });
  pool.execute([&] { ran += 100; });

  std::vector<weft::job> unrun = pool.shutdown_now();
  CHECK(unrun.size() == 3);
  CHECK(pool.state() >= pool_state::stop);
  REQUIRE(ready(stopper));
  CHECK(saw_stop);
  REQUIRE(pool.await_termination(hang_limit));
  CHECK(ran == 0);

  // The holder decides: run one, drop the rest. A dropped submit()'s future
  // hears rejected_execution instead of waiting forever.
  unrun[1]();
  CHECK(ran == 10);
  unrun.clear();
  REQUIRE(ready(awaited));
  CHECK_THROWS_AS(awaited.get(), weft::rejected_execution);
  CHECK(ran == 10);
  auto s = pool.stats();
  CHECK(s.returned == 3);  // handed back by shutdown_now: accepted, not rejected
  CHECK(s.rejected == 0);
  check_consistent(s);
}

TEST_CASE("a job handed back by shutdown_now can be executed on another pool") {
  bounded_elastic first(small(1));
  gate g;
  occupy(first, g);
  auto answer = first.submit([] { return std::this_thread::get_id(); });
  std::vector<weft::job> unrun = first.shutdown_now();
  REQUIRE(unrun.size() == 1);
  g.open();
  bounded_elastic second(small(1));
  second.execute(std::move(unrun[0]));
  CHECK_FALSE(static_cast<bool>(unrun[0]));
  REQUIRE(ready(answer));
  CHECK(answer.get() != std::this_thread::get_id());
  second.shutdown();
  REQUIRE(second.await_termination(hang_limit));
  CHECK(second.stats().completed == 1);
}

TEST_CASE("idle workers above core_threads age out after ttl, to zero, and the pool grows again") {
  elastic_options o = small(3);
  o.ttl = 50ms;
  o.name = "ttl";
  bounded_elastic pool(o);
  gate g;
  occupy(pool, g, 3);
  CHECK(pool.stats().pool_size == 3);
  const auto idle_from = std::chrono::steady_clock::now();
  g.open();
  REQUIRE(eventually([&] { return pool.stats().pool_size == 0; }));
  CHECK(std::chrono::steady_clock::now() - idle_from >= o.ttl);  // none left before its ttl
  CHECK(pool.stats().idle == 0);

  auto again = pool.submit(this_thread_name);
  REQUIRE(ready(again));
  CHECK(again.get() == "ttl-4");  // a fresh thread, numbered on
  CHECK(pool.stats().pool_size == 1);
  CHECK(pool.stats().largest_pool_size == 3);
}

TEST_CASE("a ttl or a wait of duration::max() means for ever, without overflow") {
  elastic_options o = small(2);
  o.ttl = std::chrono::milliseconds::max();
  bounded_elastic pool(o);
  auto f = pool.submit([] { return 1; });
  REQUIRE(ready(f));
  CHECK(f.get() == 1);
  CHECK(pool.stats().pool_size == 1);
  pool.shutdown();
  CHECK(pool.await_termination(std::chrono::nanoseconds::max()));
}

TEST_CASE("core_threads stay when idle; only the surplus ages out") {
  elastic_options o = small(3);
  o.ttl = 30ms;
  o.core_threads = 1;
  bounded_elastic pool(o);
  gate g;
  occupy(pool, g, 3);
  g.open();
  REQUIRE(eventually([&] { return pool.stats().pool_size == 1; }));
  std::this_thread::sleep_for(4 * o.ttl);  // several ttls: the core worker must still be there
  CHECK(pool.stats().pool_size == 1);
  CHECK(pool.stats().idle == 1);
}

TEST_CASE("a job that throws never kills its worker; the exception reaches on_error") {
  elastic_options o = small(1);
  std::mutex mu;
  std::vector<std::string> errors;
  o.on_error = [&](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      std::lock_guard lk(mu);
      errors.push_back(x.what());
    }
  };
  bounded_elastic pool(o);
  auto first = pool.submit([] { return std::this_thread::get_id(); });
  REQUIRE(ready(first));
  const auto worker = first.get();
  for (int i = 0; i < 5; ++i) pool.execute([] { throw std::runtime_error("job failed"); });
  auto after = pool.submit([] { return std::this_thread::get_id(); });
  REQUIRE(ready(after));
  CHECK(after.get() == worker);
  pool.shutdown();
  REQUIRE(pool.await_termination(hang_limit));
  CHECK(errors == std::vector<std::string>(5, "job failed"));
  CHECK(pool.stats().largest_pool_size == 1);
}

TEST_CASE("a rejected submit leaves every worker's busy count as it was (reactor-core#3182)") {
  bounded_elastic pool(small(1, 1));
  gate g;
  occupy(pool, g);
  pool.execute([] {});
  for (int i = 0; i < 5; ++i) CHECK_THROWS_AS(pool.execute([] {}), weft::rejected_execution);
  auto during = pool.stats();
  CHECK(during.active == 1);
  CHECK(during.queued == 1);
  CHECK(during.idle == 0);
  g.open();
  REQUIRE(eventually([&] { return pool.stats().idle == 1; }));
  auto after = pool.stats();
  CHECK(after.active == 0);
  CHECK(after.queued == 0);
  // The lone worker is free again: it takes the next job instead of the pool
  // counting it as busy and rejecting.
  for (int i = 0; i < 3; ++i) {
    auto f = pool.submit([] { return 1; });
    REQUIRE(ready(f));
    CHECK(f.get() == 1);
  }
  CHECK(pool.stats().largest_pool_size == 1);
}

TEST_CASE("a worker thread that cannot be created loses no job (tokio#8406)") {
  std::atomic<bool> fail{false};
  const elastic_options o = small(4);
  weft::detail::elastic_test_hooks hooks;
  hooks.fail_thread_start = [&] { return fail.load(); };
  bounded_elastic pool(o);
  weft::detail::elastic_set_test_hooks(pool, hooks);
  gate g;
  occupy(pool, g);
  fail = true;
  // No idle worker, room for three more threads, but none can start: the job
  // goes to the worker that exists.
  auto queued = pool.submit([] { return 7; });
  CHECK(pool.stats().pool_size == 1);
  CHECK(pool.stats().queued == 1);
  g.open();
  REQUIRE(ready(queued));
  CHECK(queued.get() == 7);

  // With no worker at all, the submit fails and says why.
  bounded_elastic empty(o);
  weft::detail::elastic_set_test_hooks(empty, hooks);
  std::string msg;
  try {
    empty.execute([] {});
  } catch (const weft::rejected_execution& e) {
    msg = e.what();
  }
  CHECK(msg.find("could not start a worker thread") != std::string::npos);
  CHECK(empty.stats().rejected == 1);
  fail = false;
  auto later = empty.submit([] { return 8; });
  REQUIRE(ready(later));
  CHECK(later.get() == 8);
}

TEST_CASE("figures are consistent at quiescence") {
  bounded_elastic pool(small(2, 5, rejection_policy::discard));
  std::vector<std::thread> submitters;
  std::atomic<int> ran{0};
  for (int t = 0; t < 4; ++t) {
    submitters.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        pool.execute([&] {
          std::this_thread::sleep_for(50us);
          ++ran;
        });
      }
    });
  }
  for (auto& t : submitters) t.join();
  pool.shutdown();
  REQUIRE(pool.await_termination(hang_limit));
  auto s = pool.stats();
  CHECK(s.submitted + s.rejected == 200);  // every job accepted or refused, never both
  CHECK(s.rejected > 0);                   // the discard policy did refuse some
  CHECK(s.completed == static_cast<std::uint64_t>(ran.load()));
  CHECK(s.queued == 0);
  CHECK(s.active == 0);
  check_consistent(s);
}

}  // TEST_SUITE

// ---- the seed's defaults (Reactor's BoundedElasticScheduler) -------------------

TEST_CASE("default options: 10 threads per core, 100,000 queued per thread, a 60 s idle TTL, no core threads") {
  const elastic_options o;
  CHECK(o.max_threads == 10 * weft::detail::cores());
  CHECK(o.max_queued_per_thread == 100'000);
  CHECK(o.ttl == std::chrono::seconds(60));
  CHECK(o.core_threads == 0);
  CHECK(o.on_reject == rejection_policy::abort);
}

TEST_CASE("the default queue bound shows: a worker takes 100,000 queued jobs and refuses the next") {
  elastic_options o;  // the default max_queued_per_thread
  o.max_threads = 1;
  bounded_elastic pool(o);
  gate g;
  occupy(pool, g);  // the one worker is busy: every later job queues
  std::atomic<int> ran{0};
  for (std::size_t i = 0; i < o.max_queued_per_thread; ++i) pool.execute([&ran] { ++ran; });
  CHECK(pool.stats().queued == 100'000);
  CHECK_THROWS_AS(pool.execute([&ran] { ++ran; }), weft::rejected_execution);
  g.open();
  pool.shutdown();
  CHECK(pool.await_termination(hang_limit));
  CHECK(ran == 100'000);
}

// ---- the structures behind admission ----------------------------------------

TEST_SUITE("load_tree") {

TEST_CASE("least and most are the lowest slot of equals and follow every change") {
  using weft::detail::load_tree;
  load_tree t;
  CHECK(t.least() == load_tree::none);
  CHECK(t.most() == load_tree::none);
  t.reserve(5);
  for (std::uint32_t s = 0; s < 5; ++s) t.set(s, 0);
  CHECK(t.least() == 0);
  CHECK(t.most() == load_tree::none);  // nothing to take from: every load is 0
  t.set(3, 2);
  t.set(1, 2);
  CHECK(t.most() == 1);   // 1 and 3 tie at 2: the lower slot
  CHECK(t.least() == 0);  // 0, 2 and 4 tie at 0
  t.set(0, 1);
  t.set(2, 1);
  t.set(4, 1);
  CHECK(t.least() == 0);
  t.erase(0);
  CHECK(t.least() == 2);
  t.set(3, 3);
  CHECK(t.most() == 3);
  t.set(3, 0);
  CHECK(t.least() == 3);
  CHECK(t.most() == 1);
  CHECK(t.consistent());
}

TEST_CASE("load_tree agrees with a scan in slot order over 200,000 random changes, across growth") {
  using weft::detail::load_tree;
  load_tree t;
  std::vector<std::int64_t> model;  // -1: not in the set
  std::mt19937 rng(7);
  int mismatches = 0;
  for (int step = 0; step < 200'000 && mismatches < 5; ++step) {
    if (model.size() < 70 && rng() % 500 == 0) {  // a new slot, now and then past a power of two
      model.push_back(-1);
      t.reserve(model.size());
    }
    if (model.empty()) continue;
    const auto s = static_cast<std::uint32_t>(rng() % model.size());
    const unsigned op = rng() % 16;
    if (op == 0) {
      t.erase(s);
      model[s] = -1;
    } else {
      const std::int64_t load = op < 9 ? model[s] + 1 : std::max<std::int64_t>(0, model[s] - 1);
      t.set(s, static_cast<std::size_t>(load));
      model[s] = load;
    }
    std::uint32_t least = load_tree::none, most = load_tree::none;
    for (std::uint32_t i = 0; i < model.size(); ++i) {
      if (model[i] < 0) continue;
      if (least == load_tree::none || model[i] < model[least]) least = i;
      if (model[i] > 0 && (most == load_tree::none || model[i] > model[most])) most = i;
    }
    if (t.least() != least || t.most() != most) {
      ++mismatches;
      FAIL_CHECK("step " << step << ": least " << t.least() << " (scan " << least << "), most " << t.most()
                         << " (scan " << most << ")");
    }
  }
  CHECK(t.consistent());
}

}  // TEST_SUITE

namespace {

struct idler {
  std::uint32_t idle_pos = 0;
  int id = 0;
};

std::vector<int> ids_of(const weft::detail::idle_stack<idler>& s) {
  std::vector<int> out;
  s.for_each([&](const idler* e) { out.push_back(e->id); });
  return out;
}

}  // namespace

TEST_SUITE("idle_stack") {

TEST_CASE("the top is the most recently pushed; erasing from the middle keeps the order of the rest") {
  weft::detail::idle_stack<idler> s;
  idler e[6];
  for (int i = 0; i < 6; ++i) {
    e[i].id = i;
    s.push(&e[i]);
  }
  CHECK(s.top() == &e[5]);
  s.erase(&e[2]);  // a hole
  s.erase(&e[0]);
  CHECK(s.size() == 4);
  CHECK(ids_of(s) == std::vector<int>{1, 3, 4, 5});
  CHECK(s.consistent());
  s.erase(&e[5]);  // the top: trailing holes go with it
  CHECK(s.top() == &e[4]);
  s.erase(&e[4]);
  s.erase(&e[3]);  // holes now outnumber the rest: compacted
  CHECK(s.top() == &e[1]);
  CHECK(s.consistent());
  s.push(&e[2]);
  CHECK(ids_of(s) == std::vector<int>{1, 2});
  s.erase(&e[1]);
  s.erase(&e[2]);
  CHECK(s.top() == nullptr);
  CHECK(s.size() == 0);
  CHECK(s.consistent());
}

TEST_CASE("idle_stack agrees with a plain vector over 100,000 random pushes, pops and erasures") {
  constexpr int n = 16;
  weft::detail::idle_stack<idler> s;
  s.reserve(n);
  idler e[n];
  std::vector<idler*> model;  // bottom first
  std::mt19937 rng(3);
  int mismatches = 0;
  for (int i = 0; i < n; ++i) e[i].id = i;
  for (int step = 0; step < 100'000 && mismatches < 5; ++step) {
    idler* x = &e[rng() % n];
    const bool in = std::find(model.begin(), model.end(), x) != model.end();
    if (!in) {
      s.push(x);
      model.push_back(x);
    } else if (rng() % 2 == 0 && s.top()) {  // admission: the top
      idler* t = s.top();
      s.erase(t);
      model.pop_back();
    } else {  // ttl or shutdown: anywhere
      s.erase(x);
      model.erase(std::find(model.begin(), model.end(), x));
    }
    std::vector<int> want;
    for (idler* m : model) want.push_back(m->id);
    if (ids_of(s) != want || s.top() != (model.empty() ? nullptr : model.back()) || !s.consistent()) {
      ++mismatches;
      FAIL_CHECK("step " << step << ": the stack differs from the model");
    }
  }
}

}  // TEST_SUITE

TEST_SUITE("bounded_elastic") {

TEST_CASE("the backlog's index and its scan pick the same queues, before and after the switch") {
  // Two backlogs over the same queue lengths: one indexed from the start,
  // one that scans until its default threshold and then builds its index.
  using weft::detail::elastic_backlog;
  using weft::detail::elastic_queue;
  using weft::detail::job_node;
  elastic_backlog indexed, scanning;
  indexed.index_from(0);
  constexpr std::size_t slots = elastic_backlog::default_index_from + 8;
  std::vector<std::unique_ptr<elastic_queue>> qa, qb;
  std::vector<std::vector<std::unique_ptr<job_node>>> nodes_a(slots), nodes_b(slots);
  std::mt19937 rng(11);
  int mismatches = 0;
  auto same = [&](elastic_queue* a, elastic_queue* b) {
    return a == nullptr ? b == nullptr : b != nullptr && a->slot == b->slot;
  };
  for (int step = 0; step < 100'000 && mismatches < 5; ++step) {
    if (qa.size() < slots && (qa.empty() || rng() % 300 == 0)) {
      for (auto* q : {&qa, &qb}) q->push_back(std::make_unique<elastic_queue>());
      indexed.add_slot(*qa.back());
      scanning.add_slot(*qb.back());
    }
    const auto s = rng() % qa.size();
    elastic_queue& a = *qa[s];
    elastic_queue& b = *qb[s];
    const unsigned op = rng() % 16;
    if (!a.open) {
      indexed.open(a);
      scanning.open(b);
    } else if (op == 0 && a.empty()) {
      indexed.close(a);
      scanning.close(b);
    } else if (op < 8 || a.empty()) {
      nodes_a[s].push_back(std::make_unique<job_node>());
      nodes_b[s].push_back(std::make_unique<job_node>());
      indexed.push(a, nodes_a[s].back().get());
      scanning.push(b, nodes_b[s].back().get());
    } else if (op < 12) {
      CHECK(indexed.pop(a) != nullptr);
      CHECK(scanning.pop(b) != nullptr);
    } else {  // a withdrawal from the middle
      std::vector<job_node*> queued_a, queued_b;
      for (std::size_t k = 0; k < nodes_a[s].size(); ++k) {
        if (nodes_a[s][k]->queue) {
          queued_a.push_back(nodes_a[s][k].get());
          queued_b.push_back(nodes_b[s][k].get());
        }
      }
      const auto k = rng() % queued_a.size();
      indexed.unlink(queued_a[k]);
      scanning.unlink(queued_b[k]);
    }
    if (!same(indexed.shortest(), scanning.shortest()) || !same(indexed.longest(), scanning.longest())) {
      ++mismatches;
      FAIL_CHECK("step " << step << ": the index and the scan disagree");
    }
    if (!indexed.index_consistent() || !scanning.index_consistent()) {
      ++mismatches;
      FAIL_CHECK("step " << step << ": an index disagrees with its queues");
    }
  }
  CHECK(indexed.size() == scanning.size());
  CHECK(scanning.indexed());  // it passed its threshold on the way
}

}  // TEST_SUITE

namespace {

// A job node the test owns outright: the pool runs, finishes, drops or gives
// back one, and each of those ends it exactly once. Its memory outlives the
// pool, so withdrawing it races only the pool, never its freeing.
struct probe_node : weft::detail::job_node {
  std::atomic<int> ends{0};
  std::atomic<bool> ran{false};
  std::atomic<bool> evicted{false};
  std::chrono::microseconds work{0};

  probe_node() { ops = &table; }
  static void run(job_node* n, std::stop_token) noexcept {
    auto* self = static_cast<probe_node*>(n);
    const auto until = std::chrono::steady_clock::now() + self->work;
    while (std::chrono::steady_clock::now() < until) {
    }
    self->ran = true;
  }
  static std::exception_ptr finish(job_node* n) noexcept {
    ++static_cast<probe_node*>(n)->ends;
    return nullptr;
  }
  static void drop(job_node* n, const char*) noexcept {
    auto* self = static_cast<probe_node*>(n);
    self->evicted = true;
    ++self->ends;
  }
  static constexpr weft::detail::job_ops table{&run, &finish, &drop};
};

}  // namespace

TEST_SUITE("bounded_elastic") {

TEST_CASE("under concurrent admission, withdrawal, stealing and ageing out, every structure stays consistent") {
  // Three submitters race three workers that age out after 1 ms (so slots
  // are freed and reused), queues of 4 (so least-busy placement and the
  // rejection policy both run), withdrawals from the middle of queues, and
  // an auditor that checks every invariant of the core while all of it runs;
  // once with the backlog scanning (as a pool this small does) and once with
  // its index forced on.
  for (int run = 0; run < 8; ++run) {
    const rejection_policy policy = std::array{rejection_policy::abort, rejection_policy::caller_runs,
                                               rejection_policy::discard, rejection_policy::discard_oldest}[run % 4];
    const bool indexed = run >= 4;
    CAPTURE(static_cast<int>(policy));
    CAPTURE(indexed);
    constexpr int submitters = 3, per_submitter = 1'500;
    elastic_options o = small(3, 4, policy);
    o.ttl = 1ms;
    bounded_elastic pool(o);
    weft::detail::elastic_core& core = weft::detail::elastic_access::core(pool);
    if (indexed) {
      std::lock_guard lk(core.mu);
      core.backlog.index_from(0);
    }
    std::vector<std::unique_ptr<probe_node>> nodes;
    for (int i = 0; i < submitters * per_submitter; ++i) nodes.push_back(std::make_unique<probe_node>());

    std::atomic<bool> done{false};
    std::atomic<int> audits{0};
    std::string broken;
    std::thread auditor([&] {
      while (!done.load() && broken.empty()) {
        broken = weft::detail::elastic_audit(core);
        ++audits;
        std::this_thread::sleep_for(20us);
      }
    });
    std::atomic<std::uint64_t> refused{0}, withdrawn{0}, ran_here{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < submitters; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 rng(static_cast<unsigned>(t + 1));
        for (int i = 0; i < per_submitter; ++i) {
          probe_node* n = nodes[static_cast<std::size_t>(t * per_submitter + i)].get();
          n->work = std::chrono::microseconds(rng() % 30);
          const char* why = nullptr;
          weft::detail::admitted a;
          try {
            a = weft::detail::elastic_admit(&core, n, &why);
          } catch (const weft::rejected_execution&) {
            ++refused;
            ++n->ends;
            continue;
          }
          if (a == weft::detail::admitted::run_here) {
            n->ops->run(n, {});
            n->ops->finish(n);
            ++ran_here;
          } else if (a == weft::detail::admitted::discarded) {
            ++refused;
            ++n->ends;
          }
          if (i >= 3 && rng() % 3 == 0) {  // one of our last few, wherever it is now
            probe_node* back = nodes[static_cast<std::size_t>(t * per_submitter + i - 1 - static_cast<int>(rng() % 3))].get();
            if (weft::detail::elastic_withdraw(&core, back)) {
              ++withdrawn;
              ++back->ends;
            }
          }
          if (rng() % 64 == 0) std::this_thread::sleep_for(2ms);  // let workers age out now and then
        }
      });
    }
    for (auto& th : threads) th.join();
    pool.shutdown();
    REQUIRE(pool.await_termination(hang_limit));
    done = true;
    auditor.join();
    CHECK_MESSAGE(broken.empty(), broken);
    CHECK(weft::detail::elastic_audit(core).empty());
    CHECK(audits.load() > 0);

    std::uint64_t evicted = 0, ran = 0;
    int not_once = 0;
    for (auto& n : nodes) {
      if (n->ends.load() != 1) ++not_once;
      if (n->evicted) ++evicted;
      if (n->ran) ++ran;
    }
    CHECK(not_once == 0);  // run, dropped, refused or withdrawn: exactly one
    const auto s = pool.stats();
    CHECK(s.withdrawn == withdrawn.load());
    CHECK(s.completed + ran_here.load() == ran);
    CHECK(s.submitted + refused.load() + ran_here.load() == nodes.size());
    check_consistent(s, evicted);
    if (policy == rejection_policy::discard_oldest) {
      CHECK(s.rejected == evicted);
    } else {
      CHECK(evicted == 0);
      CHECK(s.rejected == refused.load() + ran_here.load());
    }
  }
}

}  // TEST_SUITE
