// weft/scheduled_handle.hpp — the Spring TaskScheduler surface of a runtime:
// the handle runtime::schedule_at / schedule_at_fixed_rate /
// schedule_with_fixed_delay return, and periodic_error. The job behind a
// handle, and how the scheduler runs it, is detail/scheduled_job.hpp.
//
// Rules (ScheduledThreadPoolExecutor's): a time already past runs at once;
// equal due times run in the order they were scheduled; a fixed-rate job that
// overran runs its missed turns back to back, never overlapping itself; a
// fixed-delay job waits `delay` after each run ends; an exception thrown by a
// run goes to runtime_options::on_error and stops the later runs, unless the
// job was scheduled with periodic_error::report_and_continue; a first time or
// delay already past means now (missed periods are never replayed); cancel()
// stops future runs, and a run in progress finishes.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <type_traits>
#include <utility>

#include <weft/detail/scheduled_job.hpp>
#include <weft/detail/timer.hpp>
#include <weft/task.hpp>

namespace weft {

// What an exception thrown by a periodic job does to its later runs (it is
// reported through runtime_options::on_error either way). Pass it as the last
// argument of schedule_at_fixed_rate / schedule_with_fixed_delay.
enum class periodic_error {
  stop,                 // no later runs (ScheduledThreadPoolExecutor's rule; the default)
  report_and_continue,  // keep the schedule (Spring's default for repeating tasks)
};

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
static_assert(periodic_error{} == periodic_error::stop, "scheduled_job::on_error starts as periodic_error{}");

// A job running fn, armed on rt (runtime::schedule_*): the handle returned
// holds one reference to it, the scheduler another.
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
