// weft/detail/scheduled_job.hpp — a job of the runtime's scheduler
// (runtime::schedule_*, scheduled_handle.hpp): the type-erased callable it
// runs, and the counted record its timer, its handles and the scheduler share.
//
// How: every scheduled job's timer sits in the wheel of the runtime's first
// loop, whose (deadline, arm order) firing order gives "equal due times in
// submission order"; each run is a task started, in firing order, on the
// loop that fired it (any loop may, when the first is busy), and a periodic
// job is re-armed only after its run has finished (lib/time/scheduler.cpp).
//
// A job lives while anyone holds a reference: each scheduled_handle, and the
// scheduler until the job is done. `phase` and the gate's list belong to the
// gate's mutex; `cancel_requested` may be set from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include <weft/detail/context.hpp>
#include <weft/detail/timer.hpp>
#include <weft/task.hpp>

namespace weft {

enum class periodic_error;  // scheduled_handle.hpp

namespace detail {

class runtime_impl;
struct scheduler_gate;

// One run of a scheduled job's callable, type-erased.
struct scheduled_work {
  virtual ~scheduled_work() = default;
  virtual task<void> run() = 0;
  // run() may suspend (the callable returns a task). A plain callable runs
  // to its end inside run()'s first step.
  bool suspends = false;
};

template <class F>
struct scheduled_fn final : scheduled_work {
  F fn;
  explicit scheduled_fn(F f) : fn(std::move(f)) { suspends = std::is_invocable_r_v<task<void>, F&>; }
  task<void> run() override {
    if constexpr (std::is_invocable_r_v<task<void>, F&>) {
      co_await fn();  // fn stays alive with the job, past the task it returned
    } else {
      fn();
      co_return;
    }
  }
};

template <class F>
concept schedulable = std::is_invocable_r_v<task<void>, F&> || std::is_invocable_r_v<void, F&>;

struct scheduled_job : timer_node {
  enum class kind : std::uint8_t { once, fixed_rate, fixed_delay };
  enum class phase : std::uint8_t { posted, armed, running, done };  // under the gate's mutex

  std::atomic<std::uint32_t> refs{1};
  std::atomic<bool> cancel_requested{false};
  std::unique_ptr<scheduled_work> work;
  kind how = kind::once;
  periodic_error on_error{};  // periodic_error::stop, its first enumerator
  phase at = phase::posted;
  clock::time_point due;
  clock::duration period{};
  runtime_impl* rt = nullptr;     // used by the scheduler while the job is not done
  scheduler_gate* gate = nullptr; // how other threads reach it (lib/time/scheduler_gate.hpp)
  scheduled_job* prev = nullptr;  // the gate's list of jobs not done
  scheduled_job* next = nullptr;

  scheduled_job() = default;
  scheduled_job(const scheduled_job&) = delete;
  scheduled_job& operator=(const scheduled_job&) = delete;
  ~scheduled_job();  // lets go of the gate

  void add_ref() noexcept {
    // relaxed: always taken by a holder of another reference.
    refs.fetch_add(1, std::memory_order_relaxed);
  }
  void drop_ref() noexcept {
    // acq_rel: the last holder deletes after everyone else's last use.
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
};

// Arms a new job on rt. rejected_execution after shutdown.
void schedule_job(runtime_impl* rt, scheduled_job* job);
void cancel_job(scheduled_job* job) noexcept;

}  // namespace detail
}  // namespace weft
