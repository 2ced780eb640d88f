// tests/core/test_ring_faults.cpp — io_uring faults are errors or retries, never
// lost work: a full submission queue, EBUSY, EAGAIN and EINTR from submission.
#include <doctest/doctest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include <weft/weft.hpp>

#include "core/loop.hpp"
#include "core/runtime_impl.hpp"
#include "core/runtime_test_hooks.hpp"
#include "support.hpp"

using namespace weft;
using namespace std::chrono_literals;

namespace {
// Spawns from a plain thread onto loops that keep falling asleep, so every
// wake goes through the eventfd read re-armed on each loop's ring.
void run_wakes_under(detail::ring_faults& faults) {
  runtime_options o;
  o.loops = 2;
  o.ring_entries = 4;  // a small queue fills quickly
  runtime rt = detail::runtime_test_hooks::with_faults(o, faults);
  std::atomic<int> ran{0};
  for (int round = 0; round < 200; ++round) {
    auto h = rt.spawn([](std::atomic<int>& r) -> task<void> {
      ++r;
      co_return;
    }(ran));
    test::wait_for([&] { return h.done(); }, "a spawned task to finish under injected ring faults");
    h.join_blocking();
    if (round % 20 == 0) {
      // Let both loops fall asleep, so the next spawn must wake one through
      // the (faulty) ring.
      test::wait_for([&] {
        for (auto& l : detail::runtime_test_hooks::impl(rt).loops)
          if (!l->sleeping.load()) return false;
        return true;
      }, "both loops to fall asleep");
    }
  }
  CHECK(ran == 200);
}
}  // namespace

TEST_CASE("a full submission queue loses no submission") {
  detail::ring_faults faults;
  faults.full_sqes = 100;
  run_wakes_under(faults);
  CHECK(faults.served > 0);
}

TEST_CASE("EBUSY from submission is retried after reaping") {
  detail::ring_faults faults;
  faults.submit_errno = EBUSY;
  faults.failed_submits = 100;
  run_wakes_under(faults);
  CHECK(faults.served > 0);
}

TEST_CASE("EAGAIN from submission is retried after reaping") {
  detail::ring_faults faults;
  faults.submit_errno = EAGAIN;
  faults.failed_submits = 100;
  run_wakes_under(faults);
  CHECK(faults.served > 0);
}

TEST_CASE("EINTR from submission is retried") {
  detail::ring_faults faults;
  faults.submit_errno = EINTR;
  faults.failed_submits = 100;
  run_wakes_under(faults);
  CHECK(faults.served > 0);
}
