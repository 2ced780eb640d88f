// lib/blocking/elastic_parker.hpp — how an idle bounded_elastic worker sleeps and is woken.
//
// One parker per worker; one thread parks on it, any thread unparks it. The
// state word is a futex:
//    0 (empty)    — nothing pending, nobody parked
//    1 (notified) — an unpark arrived; the next park returns at once
//   -1 (parked)   — the owner is (about to be) asleep in FUTEX_WAIT
// An unpark that finds `empty` (the worker has not gone to sleep yet) costs
// one atomic exchange and no system call.
// The worker re-checks its real condition (its queue, under the pool's mutex)
// after every return, so a spurious or timed-out return is harmless.
#pragma once

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <ctime>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/cpu_relax.hpp"

namespace weft::detail {

class elastic_parker {
 public:
  using clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC in libstdc++

  void unpark() noexcept {
    // release: pairs with the acquire in park_until, so the woken
    // worker sees what was written before the unpark. (The job itself is
    // handed over under the pool's mutex; this only orders the state word.)
    if (state_.exchange(notified_, std::memory_order_release) == parked_) {
      syscall(SYS_futex, &state_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
    }
  }

  // Sleeps until unparked or `deadline` passes. Returns true if unparked
  // (the notification is consumed), false on timeout.
  bool park_until(clock::time_point deadline) noexcept {
    // Poll briefly first: a job handed over within spin_for (the next of a
    // loop's back-to-back offloads) costs neither a futex wake nor, on a VM
    // whose idle vCPU halted, its tens-of-microseconds wake-up. The unpark
    // finds `empty` and costs one exchange.
    const auto spin_until = std::min(deadline, clock::now() + spin_for);
    do {
      for (int i = 0; i < 32; ++i) {
        // acquire: as below; the exchange consumes the notification.
        if (state_.load(std::memory_order_relaxed) == notified_ &&
            state_.exchange(empty_, std::memory_order_acquire) == notified_)
          return true;
        cpu_relax();
      }
    } while (clock::now() < spin_until);
    // acquire: pairs with unpark's release. notified -> empty returns at
    // once; empty -> parked goes to sleep.
    if (state_.fetch_sub(1, std::memory_order_acquire) == notified_) return true;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
    timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    for (;;) {
      // An absolute CLOCK_MONOTONIC deadline, so spurious wakes need no re-arithmetic.
      syscall(SYS_futex, &state_, FUTEX_WAIT_BITSET_PRIVATE, parked_, &ts, nullptr, FUTEX_BITSET_MATCH_ANY);
      std::int32_t expect = notified_;
      // acquire: as above.
      if (state_.compare_exchange_strong(expect, empty_, std::memory_order_acquire)) return true;
      if (clock::now() >= deadline) {
        // acquire: an unpark may have landed between the check and here.
        return state_.exchange(empty_, std::memory_order_acquire) == notified_;
      }
    }
  }

 private:
  static constexpr std::int32_t empty_ = 0, notified_ = 1, parked_ = -1;
  static constexpr auto spin_for = std::chrono::microseconds(20);
  std::atomic<std::int32_t> state_{empty_};
};

}  // namespace weft::detail
