// lib/core/spin_lock.hpp — a test-and-set lock for sections of a few pointer moves.
//
// Guards the hot per-loop structures that peers touch now and then: a run
// queue, the timer wheel, the live list. Uncontended, lock is one exchange
// and unlock one release store (std::mutex costs a second atomic RMW on
// unlock, which showed in W1: every spawn and every run takes a run queue's
// lock). A contender spins on a plain load (no cache-line ping-pong) with the
// pause hint, and after a few hundred rounds yields its CPU, in case the
// holder was preempted. Not fair, not recursive.
#pragma once

#include <atomic>
#include <thread>

#include "core/cpu_relax.hpp"

namespace weft::detail {

class spin_lock {
 public:
  void lock() noexcept {
    // acquire: the section's reads see the previous holder's writes.
    if (!held_.exchange(true, std::memory_order_acquire)) return;
    for (unsigned spins = 0;; ++spins) {
      while (held_.load(std::memory_order_relaxed)) {
        if (++spins < 256) cpu_relax();
        else std::this_thread::yield();
      }
      if (!held_.exchange(true, std::memory_order_acquire)) return;
    }
  }
  bool try_lock() noexcept {
    return !held_.load(std::memory_order_relaxed) && !held_.exchange(true, std::memory_order_acquire);
  }
  // release: publishes the section's writes to the next holder.
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

}  // namespace weft::detail
