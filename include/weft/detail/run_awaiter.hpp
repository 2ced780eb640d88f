// weft/detail/run_awaiter.hpp — the awaitable behind bounded_elastic::run()
// and offload(): a blocking job handed to the pool from a task, which
// resumes on the task's own loop with the job's value or exception.
//
// It is its own job node (no allocation) and its own cancel hook; the
// contract of who ends the suspension is on the class below.
#pragma once

#include <weft/detail/context.hpp>
#include <weft/detail/elastic_entry.hpp>
#include <weft/detail/job_invoke.hpp>
#include <weft/detail/job_node.hpp>
#include <weft/errors.hpp>
#include <weft/outcome.hpp>

#include <coroutine>
#include <exception>
#include <stdexcept>
#include <stop_token>
#include <type_traits>
#include <utility>

namespace weft::detail {

// The awaitable behind run(). It is its own job node (no allocation) and its
// own cancel hook. Who ends the suspension, exactly once:
//  * a worker, after running the job: finish() wakes the task;
//  * the pool, dropping the job unrun (discard_oldest, or a handed-back job
//    destroyed by its holder): drop() wakes it with rejected_execution;
//  * on_cancel, if it withdrew the job while still queued: it wakes it.
// Leaving the pool's queues happens once, under the pool's mutex, so only one
// of these can apply. A cancelled task is resumed cancelled by any of these
// wakes, and so stops (detail/context.hpp): a running job is awaited first,
// and its result goes with the frame. The frame (with the node) stays alive
// while on_cancel runs even if a wake comes meanwhile: on_cancel runs while
// the task is running, and a wake then only marks it (detail/context.hpp).
// The awaiter holds a reference on the pool's core from admission
// to destruction, so on_cancel may lock it even if the bounded_elastic
// object is gone (it was shut down with shutdown_now and destroyed).
template <class F>
class run_awaiter : job_node, cancel_hook {
  using R = job_result_t<F>;

 public:
  run_awaiter(elastic_core* c, F fn) : core_(c), fn_(std::move(fn)) {
    job_node::ops = &table;
    on_cancel = &cancel;
  }
  run_awaiter(const run_awaiter&) = delete;
  run_awaiter& operator=(const run_awaiter&) = delete;
  ~run_awaiter() {
    if (retained_) elastic_release(core_);
  }

  bool await_ready() const noexcept { return false; }

  bool await_suspend(std::coroutine_handle<> h) {
    task_context* ctx = current_context();
    if (!ctx) {
      throw std::logic_error(
          "weft: bounded_elastic::run()/offload() awaited off a loop thread; "
          "from a plain thread use bounded_elastic::submit()");
    }
    if (stop_if_cancelled(ctx, h)) return true;
    ctx_ = ctx;
    // Set before admitting: a worker may finish the job and wake ctx before
    // elastic_admit returns (the resumption itself waits for this loop).
    ctx->resume_point = h;
    ctx->hook = this;
    elastic_retain(core_);
    retained_ = true;
    const char* why = nullptr;
    admitted a;
    try {
      a = elastic_admit(core_, this, &why);
    } catch (...) {
      outcome_access::set_error(out_, std::current_exception());
      a = admitted::discarded;
    }
    if (a == admitted::queued) return true;
    ctx->hook = nullptr;
    ctx->resume_point = {};
    if (a == admitted::run_here) {
      run(this, elastic_stop_token(core_));
    } else if (why) {
      outcome_access::set_error(out_, std::make_exception_ptr(rejected_execution(why)));
    }
    return false;
  }

  R await_resume() { return outcome_access::take(out_); }

 private:
  static void run(job_node* n, std::stop_token pool_stop) noexcept {
    auto* self = static_cast<run_awaiter*>(n);
    if constexpr (takes_stop_token<F>) {
      // The job stops on either request: its awaiter's cancellation (stop_)
      // or the pool's shutdown_now (pool_stop), forwarded for the run only.
      std::stop_callback forward(pool_stop, [self]() noexcept { self->stop_.request_stop(); });
      capture_job(self->out_, self->fn_, self->stop_.get_token());
    } else {
      capture_job(self->out_, self->fn_, std::move(pool_stop));
    }
  }
  static std::exception_ptr finish(job_node* n) noexcept {
    // The last touch of the frame: once woken, the task may destroy it.
    wake(static_cast<run_awaiter*>(n)->ctx_);
    return nullptr;
  }
  static void drop(job_node* n, const char* why) noexcept {
    auto* self = static_cast<run_awaiter*>(n);
    outcome_access::set_error(self->out_, std::make_exception_ptr(rejected_execution(why)));
    wake(self->ctx_);
  }
  static void cancel(cancel_hook* h) noexcept {
    auto* self = static_cast<run_awaiter*>(h);
    // Whichever wake comes, the task is resumed cancelled and so stops.
    if (elastic_withdraw(self->core_, self)) {
      wake(self->ctx_);  // it never ran and never will: ours is the one wake
    } else if constexpr (takes_stop_token<F>) {
      // Running, or held by someone who may still run it: ask it to stop;
      // its finish (or drop) is the wake.
      self->stop_.request_stop();
    }
  }
  static constexpr job_ops table{&run, &finish, &drop};

  struct no_stop {};
  elastic_core* core_;
  F fn_;
  task_context* ctx_ = nullptr;
  [[no_unique_address]] std::conditional_t<takes_stop_token<F>, std::stop_source, no_stop> stop_;
  outcome<R> out_;
  bool retained_ = false;
};

}  // namespace weft::detail
