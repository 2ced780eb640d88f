// lib/time/scheduler_gate.hpp — the door from a scheduled_handle to its runtime,
// which may be gone by the time the handle is used, and the scheduler's state.
//
// A scheduled_handle can outlive its runtime, and schedule/cancel may race
// shutdown from any thread; both arm or disarm a timer on the runtime's first
// loop, which must still be there (a timer armed after the loops quit would
// never fire, and the arm itself would touch a freed runtime). So every such
// call goes through the gate:
//   state = open | k * pin   k threads are posting now; open until shutdown
// enter() pins only while open; shutdown closes the gate and waits for the
// pins to drain before it quits the loops, so every message that got in is
// taken by a live loop, and nothing gets in afterwards. The gate itself is
// counted (the runtime, and each job that went through it) and outlives the
// runtime for as long as a job does.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>

namespace weft::detail {

class runtime_impl;
struct scheduled_job;

struct scheduler_gate {
  static constexpr std::uint32_t open = 1;
  static constexpr std::uint32_t pin = 2;

  explicit scheduler_gate(runtime_impl* r) noexcept : rt(r) {}

  runtime_impl* const rt;  // valid while pinned
  // The scheduler's state (lib/time/scheduler.cpp): every job's phase and the
  // list of jobs not done, which shutdown drops.
  std::mutex mu;
  scheduled_job* jobs = nullptr;
  // Runs fired so far (under the first loop's wheel lock, where every job's
  // timer is), and runs that have started: run n starts once started == n,
  // so runs start in firing order on whichever loops they run.
  std::uint64_t fired = 0;
  std::atomic<std::uint64_t> started{0};
  std::atomic<std::uint32_t> refs{1};
  std::atomic<std::uint32_t> state{open};

  bool enter() noexcept {
    // acquire: a pin taken while open keeps rt alive until leave().
    std::uint32_t cur = state.load(std::memory_order_acquire);
    do {
      if (!(cur & open)) return false;
    } while (!state.compare_exchange_weak(cur, cur + pin, std::memory_order_acquire, std::memory_order_acquire));
    return true;
  }
  void leave() noexcept {
    // release: our post happens before close() sees the pins gone.
    state.fetch_sub(pin, std::memory_order_release);
  }
  // Shutdown, before the loops quit. Posts take microseconds, so a yield loop.
  void close() noexcept {
    state.fetch_and(~open, std::memory_order_acq_rel);
    // acquire: pairs with leave(); every message that got in is queued now.
    while (state.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  }
  void add_ref() noexcept {
    // relaxed: taken by a holder of another reference.
    refs.fetch_add(1, std::memory_order_relaxed);
  }
  void drop_ref() noexcept {
    // acq_rel: the last holder deletes after everyone else's use.
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
};

}  // namespace weft::detail
