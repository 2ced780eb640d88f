// weft/scheduled_handle.hpp — the Spring TaskScheduler surface of a runtime:
// the handle runtime::schedule_at / schedule_at_fixed_rate /
// schedule_with_fixed_delay return, and the job behind it.
//
// Rules (ScheduledThreadPoolExecutor's): a time already past runs at once;
// equal due times run in the order they were scheduled; a fixed-rate job that
// overran runs its missed turns back to back, never overlapping itself; a
// fixed-delay job waits `delay` after each run ends; an exception thrown by a
// run goes to runtime_options::on_error and stops the later runs, unless the
// job was scheduled with periodic_error::report_and_continue; a first time or
// delay already past means now (missed periods are never replayed); cancel()
// stops future runs, and a run in progress finishes.
//
// How: every scheduled job's timer sits in the wheel of the runtime's first
// loop, whose (deadline, arm order) firing order gives "equal due times in
// submission order"; each run is a task started, in firing order, on the
// loop that fired it (any loop may, when the first is busy), and a periodic
// job is re-armed only after its run has finished (lib/scheduler.cpp).
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

}  // namespace detail

// What an exception thrown by a periodic job does to its later runs (it is
// reported through runtime_options::on_error either way). Pass it as the last
// argument of schedule_at_fixed_rate / schedule_with_fixed_delay.
enum class periodic_error {
  stop,                 // no later runs (ScheduledThreadPoolExecutor's rule; the default)
  report_and_continue,  // keep the schedule (Spring's default for repeating tasks)
};

namespace detail {

struct scheduled_job : timer_node {
  enum class kind : std::uint8_t { once, fixed_rate, fixed_delay };
  enum class phase : std::uint8_t { posted, armed, running, done };  // under the gate's mutex

  std::atomic<std::uint32_t> refs{1};
  std::atomic<bool> cancel_requested{false};
  std::unique_ptr<scheduled_work> work;
  kind how = kind::once;
  periodic_error on_error = periodic_error::stop;
  phase at = phase::posted;
  clock::time_point due;
  clock::duration period{};
  runtime_impl* rt = nullptr;     // used by the scheduler while the job is not done
  scheduler_gate* gate = nullptr; // how other threads reach it (lib/scheduler_gate.hpp)
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

// Shared handle to a scheduled job; copies refer to the same job.
class scheduled_handle {
 public:
  scheduled_handle() noexcept = default;
  explicit scheduled_handle(detail::scheduled_job* j) noexcept : job_(j) {}
  scheduled_handle(const scheduled_handle& o) noexcept : job_(o.job_) {
    if (job_) job_->add_ref();
  }
  scheduled_handle(scheduled_handle&& o) noexcept : job_(std::exchange(o.job_, nullptr)) {}
  scheduled_handle& operator=(scheduled_handle o) noexcept {
    std::swap(job_, o.job_);
    return *this;
  }
  ~scheduled_handle() {
    if (job_) job_->drop_ref();  // the job keeps running: dropping a handle does not cancel
  }

  // Stops future runs; a run in progress finishes. Any thread; idempotent.
  void cancel() noexcept {
    if (job_) detail::cancel_job(job_);
  }
  bool cancelled() const { return job_ && job_->cancel_requested.load(std::memory_order_acquire); }

 private:
  detail::scheduled_job* job_ = nullptr;
};

namespace detail {
template <class F>
scheduled_handle make_scheduled(runtime_impl* rt, F&& fn, scheduled_job::kind how, clock::time_point first,
                                clock::duration period, periodic_error on_error = periodic_error::stop) {
  auto* job = new scheduled_job;
  job->work = std::make_unique<scheduled_fn<std::decay_t<F>>>(std::forward<F>(fn));
  job->how = how;
  job->on_error = on_error;
  job->due = first;
  job->period = period;
  job->rt = rt;
  scheduled_handle h(job);  // the handle's reference
  job->add_ref();           // the scheduler's reference
  try {
    schedule_job(rt, job);
  } catch (...) {
    job->drop_ref();
    throw;
  }
  return h;
}
}  // namespace detail

}  // namespace weft
