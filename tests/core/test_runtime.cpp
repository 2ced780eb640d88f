// tests/core/test_runtime.cpp — the runtime: options, loops, spawn and join from
// loops and plain threads, work spreading, errors of detached tasks, shutdown.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <string>
#include <chrono>
#include <latch>
#include <mutex>
#include <set>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include <weft/weft.hpp>

#include "core/runtime_test_hooks.hpp"
#include "support.hpp"

#include "counted.hpp"
#include "never.hpp"
#include "stop_probe.hpp"

using namespace weft;
using test::eventually;
using test::finishes_cancelled;
using test::generous;
using test::loops;
using namespace std::chrono_literals;

TEST_CASE("bad options throw invalid_argument naming the option") {
  runtime_options o = loops(1);
  o.ring_entries = 0;
  CHECK_THROWS_WITH_AS(runtime{o}, doctest::Contains("ring_entries"), std::invalid_argument);
  o = loops(1);
  o.timer_tick = 0ns;
  CHECK_THROWS_WITH_AS(runtime{o}, doctest::Contains("timer_tick"), std::invalid_argument);
  o.timer_tick = -1ms;
  CHECK_THROWS_WITH_AS(runtime{o}, doctest::Contains("timer_tick"), std::invalid_argument);
}

TEST_CASE("timer_tick is accepted up to 1 s and refused above, with the range in the message") {
  runtime_options o = loops(1);
  for (auto bad : {std::chrono::nanoseconds(1s) + 1ns, std::chrono::nanoseconds(1h), std::chrono::nanoseconds::max()}) {
    o.timer_tick = bad;
    CHECK_THROWS_WITH_AS(runtime{o}, doctest::Contains("timer_tick must be in (0, 1 s]"), std::invalid_argument);
  }
  o.timer_tick = 1s;
  runtime coarse(o);
  o.timer_tick = 1ns;
  runtime fine(o);
  CHECK(fine.block_on([]() -> task<int> {
    co_await sleep_for(1ms);
    co_return 1;
  }()) == 1);
}

TEST_CASE("an unknown hardware thread count counts as one: the default pool is not empty") {
  CHECK(detail::cores_or_one(0) == 1);
  CHECK(detail::cores_or_one(8) == 8);
  CHECK(elastic_options{}.max_threads == 10 * detail::cores());
  CHECK(elastic_options{}.max_threads >= 10);
}

TEST_CASE("io_uring setup failure throws system_error naming the cause") {
  using detail::runtime_test_hooks;
  detail::ring_faults faults;
  runtime_options o = loops(2);
  faults.setup_errno = ENOMEM;
  try {
    runtime rt = runtime_test_hooks::with_faults(o, faults);
    FAIL("the runtime was built on a ring that failed");
  } catch (const std::system_error& e) {
    CHECK(e.code().value() == ENOMEM);
    CHECK(std::string(e.what()).find("RLIMIT_MEMLOCK") != std::string::npos);
  }
  faults.setup_errno = EPERM;
  CHECK_THROWS_AS(runtime_test_hooks::with_faults(o, faults), std::system_error);
  faults.setup_errno = 0;
  o.ring_entries = 1u << 20;  // beyond the kernel's limit
  CHECK_THROWS_AS(runtime_test_hooks::with_faults(o, faults), std::system_error);
}

TEST_CASE("runtime::current is null off a loop thread and the runtime on one") {
  runtime rt(loops(2));
  CHECK(runtime::current() == nullptr);
  runtime* seen = rt.block_on([]() -> task<runtime*> { co_return runtime::current(); }());
  CHECK(seen == &rt);
  CHECK(rt.loops() == 2);
}

TEST_CASE("loops = 0 means one loop per hardware thread") {
  runtime rt;
  CHECK(rt.loops() == std::max(1u, std::thread::hardware_concurrency()));
}

TEST_CASE("block_on on a loop thread throws logic_error") {
  runtime rt(loops(1));
  bool threw = rt.block_on([&]() -> task<bool> {
    try {
      rt.block_on([]() -> task<int> { co_return 1; }());
    } catch (const std::logic_error&) {
      co_return true;
    }
    co_return false;
  }());
  CHECK(threw);
}

TEST_CASE("spawn off a loop thread throws logic_error") {
  CHECK_THROWS_AS(spawn([]() -> task<int> { co_return 1; }()), std::logic_error);
}

TEST_CASE("spawned tasks are joined with their values and exceptions") {
  runtime rt(loops(2));
  int sum = rt.block_on([]() -> task<int> {
    std::vector<join_handle<int>> hs;
    for (int i = 0; i < 1000; ++i) hs.push_back(spawn([](int v) -> task<int> { co_return v; }(i)));
    int s = 0;
    for (auto& h : hs) s += co_await h;
    co_return s;
  }());
  CHECK(sum == 999 * 1000 / 2);

  bool caught = rt.block_on([]() -> task<bool> {
    auto h = spawn([]() -> task<void> {
      throw std::runtime_error("from a spawned task");
      co_return;
    }());
    try {
      co_await h;
    } catch (const std::runtime_error& e) {
      co_return std::string(e.what()) == "from a spawned task";
    }
    co_return false;
  }());
  CHECK(caught);
}

TEST_CASE("a join_handle joined twice is a logic error") {
  runtime rt(loops(1));
  CHECK_THROWS_AS(rt.block_on([]() -> task<int> {
    auto h = spawn([]() -> task<int> { co_return 1; }());
    int a = co_await h;
    co_return a + co_await h;
  }()),
                  std::logic_error);
}

TEST_CASE("spawn from a foreign thread wakes a sleeping loop") {
  runtime rt(loops(2));
  std::this_thread::sleep_for(20ms);  // let both loops fall asleep in the kernel
  std::atomic<bool> ran{false};
  auto h = rt.spawn([](std::atomic<bool>& r) -> task<void> {
    r = true;
    co_return;
  }(ran));
  auto deadline = std::chrono::steady_clock::now() + 10s;  // "did not hang"
  while (!h.done() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(100us);
  CHECK(h.done());
  CHECK(ran);
}

TEST_CASE("a burst spawned on one loop spreads to the idle loop") {
  runtime rt(loops(2));
  std::mutex mu;
  std::set<std::thread::id> threads;
  // Each task computes for at least 200 us and until both loops have run one
  // of the burst (bounded by the shared "did not hang" limit): however late
  // the OS schedules the idle loop's thread on a loaded machine, the busy
  // loop is still busy when it comes.
  const auto give_up = std::chrono::steady_clock::now() + test::generous;
  rt.block_on([&]() -> task<void> {
    std::vector<join_handle<void>> hs;
    for (int i = 0; i < 400; ++i)
      hs.push_back(spawn([](std::mutex& m, std::set<std::thread::id>& seen, auto deadline) -> task<void> {
        {
          std::lock_guard<std::mutex> g(m);
          seen.insert(std::this_thread::get_id());
        }
        const auto until = std::chrono::steady_clock::now() + 200us;
        for (;;) {
          const auto now = std::chrono::steady_clock::now();
          if (now >= deadline) break;
          if (now >= until) {
            std::lock_guard<std::mutex> g(m);
            if (seen.size() == 2) break;
          }
        }
        co_return;
      }(mu, threads, give_up)));
    for (auto& h : hs) co_await h;
  }());
  CHECK(threads.size() == 2);
}

TEST_CASE("a detached task that throws goes to on_error, not terminate") {
  std::atomic<int> errors{0};
  runtime_options o = loops(2);
  o.on_error = [&](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::runtime_error&) {
      ++errors;
    }
  };
  join_handle<void> h;
  {
    runtime rt(o);
    rt.block_on([]() -> task<void> {
      for (int i = 0; i < 10; ++i)
        spawn([]() -> task<void> {
          throw std::runtime_error("detached");
          co_return;
        }());  // handle dropped at once: detached
      co_return;
    }());
    h = rt.spawn([]() -> task<void> {
      throw std::runtime_error("dropped after it finished");
      co_return;
    }());
    while (!h.done()) std::this_thread::sleep_for(100us);
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (errors < 10 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(100us);
    CHECK(errors == 10);
  }
  h = {};  // dropped unjoined after its runtime is gone: reported, safely
  CHECK(errors == 11);
}

TEST_CASE("an exception taken through a join handle is not reported to on_error") {
  std::atomic<int> errors{0};
  runtime_options o = loops(1);
  o.on_error = [&](std::exception_ptr) { ++errors; };
  runtime rt(o);
  auto h = rt.spawn([]() -> task<int> {
    throw std::runtime_error("seen");
    co_return 0;
  }());
  CHECK_THROWS_AS(h.join_blocking(), std::runtime_error);
  CHECK(errors == 0);
}

TEST_CASE("stats count spawned, completed and live tasks") {
  runtime rt(loops(2));
  rt.block_on([]() -> task<void> {
    std::vector<join_handle<int>> hs;
    for (int i = 0; i < 100; ++i) hs.push_back(spawn([]() -> task<int> { co_return 1; }()));
    for (auto& h : hs) co_await h;
  }());
  auto s = rt.stats();
  CHECK(s.spawned >= 101);  // 100 + the block_on root
  CHECK(s.queued_per_loop.size() == 2);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (rt.stats().live_tasks != 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(100us);
  s = rt.stats();
  CHECK(s.live_tasks == 0);
  CHECK(s.completed == s.spawned);
}

TEST_CASE("shutdown stops live tasks, waits for them, and leaks no frame") {
  counted::reset();
  std::atomic<int> unwound{0};
  {
    runtime rt(loops(2));
    for (int i = 0; i < 100; ++i)
      rt.spawn([](counted, std::atomic<int>& u) -> task<void> {
        test::at_exit stopped{[&u] { ++u; }};
        co_await never{};
      }(counted{}, unwound));
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (never::parked < 100 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(100us);
    rt.shutdown();
    CHECK(unwound == 100);
    CHECK(rt.stats().live_tasks == 0);
    rt.shutdown();  // idempotent
  }
  CHECK(counted::alive() == 0);
}

TEST_CASE("spawn after shutdown throws rejected_execution") {
  runtime rt(loops(1));
  rt.shutdown();
  CHECK_THROWS_AS(rt.spawn([]() -> task<int> { co_return 1; }()), rejected_execution);
  CHECK_THROWS_AS(rt.block_on([]() -> task<int> { co_return 1; }()), rejected_execution);
}

TEST_CASE("tasks spawned but never started are dropped unrun at shutdown") {
  counted::reset();
  {
    runtime rt(loops(1));
    rt.block_on([]() -> task<void> {
      for (int i = 0; i < 1000; ++i) spawn([](counted) -> task<void> { co_return; }(counted{}));
      runtime::current()->shutdown();  // from the loop: starts the shutdown, cannot wait
      co_return;
    }());
  }
  CHECK(counted::alive() == 0);
}

TEST_CASE("tasks that keep waking each other on one loop do not starve spawns and wakes from other threads") {
  // Regression: the loop only looked at its inbox and its never-started tasks
  // when its run queue ran dry, which a lock hand-off between two tasks on one
  // loop never lets happen.
  runtime rt(loops(1));
  actor_lock lock;
  std::atomic<bool> stop{false};
  std::atomic<long> rounds{0};
  // Once both wait on the lock, each release hands it to the other (no
  // barging), so one of them is always runnable and neither ever yields.
  auto player = [](actor_lock& l, std::atomic<bool>& s, std::atomic<long>& r) -> task<void> {
    {
      auto first = co_await l.acquire();
      // Hold it until the other player queues behind us (it may start a
      // turn later: spawned from this thread, it reaches the loop later).
      co_await test::until([&] { return l.waiters() > 0 || s.load(); });
    }
    while (!s) {
      auto g = co_await l.acquire();
      ++r;
    }
  };
  auto p1 = rt.spawn(player(lock, stop, rounds));
  auto p2 = rt.spawn(player(lock, stop, rounds));
  CHECK(eventually([&] { return rounds > 1000; }));
  std::atomic<bool> ran{false};
  auto h = rt.spawn([](std::atomic<bool>& r) -> task<void> {
    r = true;
    co_return;
  }(ran));
  CHECK(eventually([&] { return ran.load(); }));
  stop = true;
  p1.join_blocking();
  p2.join_blocking();
}

TEST_CASE("destroying a runtime on one of its own loop threads says what was done wrong, then aborts") {
  // In a child process: the abort is the expected end. fork() with threads
  // alive is not supported by the sanitizers' runtimes, so there it is skipped.
  if (test::sanitized) return;
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // The child's abort is the expected end: doctest's crash handler, which
    // the child inherited, must not report it (nor print anything to the
    // suite's output).
    std::signal(SIGABRT, SIG_DFL);
    const int devnull = ::open("/dev/null", O_WRONLY);
    if (devnull >= 0) ::dup2(devnull, 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    auto* rt = new runtime(loops(1));
    rt->spawn([](runtime* r) -> task<void> {
      delete r;  // the mistake: on r's own loop thread
      co_return;
    }(rt));
    std::this_thread::sleep_for(generous);
    ::_exit(0);  // not reached when the runtime aborts
  }
  ::close(fds[1]);
  int status = 0;
  const auto give_up = std::chrono::steady_clock::now() + generous;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > give_up) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      FAIL("the child did not end within the bound");
    }
    std::this_thread::sleep_for(1ms);
  }
  std::string err;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGABRT);
  CHECK_MESSAGE(err.find("destroyed on one of its own loop threads") != std::string::npos, err);
  CHECK(err.find("Destroy it from the thread that created it") != std::string::npos);
}

TEST_CASE("shutdown_for returns false within its limit while a job ignores its stop, and frees nothing under it") {
  std::latch release(1);
  std::atomic<bool> job_started{false}, job_done{false}, frame_gone{false};
  {
    auto rt = std::make_unique<runtime>(loops(2));
    auto h = rt->spawn([](std::latch& l, std::atomic<bool>& st, std::atomic<bool>& d,
                          std::atomic<bool>& fg) -> task<void> {
      test::at_exit gone{[&fg] { fg = true; }};
      int local = 0;  // the job writes into this frame after the shutdown gave up
      auto job = [&l, &st, &d, &local] {
        st = true;
        l.wait();  // blocked, deaf to any stop request
        local = 7;
        d = true;
      };
      co_await offload(std::move(job));
    }(release, job_started, job_done, frame_gone));
    test::wait_for([&] { return job_started.load(); }, "the job to start");
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_FALSE(rt->shutdown_for(50ms));
    CHECK(std::chrono::steady_clock::now() - t0 >= 50ms);
    CHECK(std::chrono::steady_clock::now() - t0 < generous);
    CHECK_FALSE(frame_gone);  // the task waits for its job: its frame is intact
    h = {};
    rt.reset();  // abandoned: finished by a thread of its own once the job ends
  }
  release.count_down();
  test::wait_for([&] { return job_done.load() && frame_gone.load(); }, "the job to end and its task to stop");
}

TEST_CASE("shutdown_for with nothing stuck stops every task and returns true") {
  runtime rt(loops(2));
  never::parked = 0;
  auto h = rt.spawn([]() -> task<void> { co_await sleep_for(1h); }());
  auto p = rt.spawn([]() -> task<void> { co_await never{}; }());
  test::wait_for([] { return never::parked == 1; }, "a task to park");
  CHECK(rt.shutdown_for(generous));
  CHECK(rt.stats().live_tasks == 0);
  CHECK(finishes_cancelled(h));
  CHECK(finishes_cancelled(p));
  CHECK(rt.shutdown_for(0ms));  // idempotent, and nothing left to wait for
}
