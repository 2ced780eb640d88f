// weft/detail/ring_faults.hpp — fault injection for weft's io_uring wrapper.
//
// Only weft's own tests set this (lib/core/runtime_test_hooks.hpp): it makes ring
// setup fail, makes the submission queue look full, or makes submissions fail
// with EBUSY / EAGAIN / EINTR, so the tests can show that no submission is
// ever dropped. Counters are decremented as faults are served, from whichever
// loop thread hits them.
#pragma once

#include <atomic>
#include <cerrno>

namespace weft::detail {

struct ring_faults {
  std::atomic<int> setup_errno{0};        // io_uring setup fails with this errno (ENOMEM, EPERM, …)
  std::atomic<int> full_sqes{0};          // the next N SQE requests find the submission queue full
  std::atomic<int> failed_submits{0};     // the next N submissions fail with submit_errno
  std::atomic<int> submit_errno{EBUSY};   // EBUSY, EAGAIN or EINTR
  std::atomic<int> served{0};             // how many faults were injected so far

  // Takes one fault from `counter` if any is left.
  bool take(std::atomic<int>& counter) noexcept {
    int n = counter.load(std::memory_order_relaxed);
    // relaxed: a counter of test faults orders nothing else.
    while (n > 0 && !counter.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) {
    }
    if (n <= 0) return false;
    served.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
};

}  // namespace weft::detail
