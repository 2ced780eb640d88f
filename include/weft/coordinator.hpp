// weft/coordinator.hpp — a bulkhead: bounded concurrency, a bounded FIFO queue,
// early rejection, clean cancellation. Also gives weft::tenants (tenants.hpp),
// one coordinator per tenant name.
//
// Guarantees (resilience4j's Bulkhead with a bounded wait queue, or Reactor's
// flatMap(concurrency) with a bounded prefetch):
//  * At most max_concurrency jobs run, at most max_queue wait, and jobs start
//    in the order they were admitted. An arrival beyond max_concurrency +
//    max_queue is refused at once with too_many_tasks; nothing is queued.
//  * Admission happens when the task returned by execute() is first awaited
//    (tasks are lazy): creating the task reserves nothing.
//  * Cancelling the caller while its job waits removes the job at once (it
//    never runs, its place is free) and the caller stops; while it runs, the
//    job is cancelled — a coroutine job stops at its next suspension point
//    (it runs inside the caller's own task), a blocking job is asked through
//    its std::stop_token and awaited (offload).
//  * Work in progress is released exactly once per admitted job, however it
//    ends; a job that throws never keeps the next ones waiting.
//  * The coordinator may be shared by tasks on every loop of a runtime, and
//    by several runtimes.
//
// A job that awaits execute() on its own coordinator needs a second slot: if
// every slot is held by such jobs, they wait for each other for ever, as
// with any semaphore.
//
// Lifetime: a coordinator must outlive the *start* of every task it returned.
// Jobs already admitted keep its state alive, so a coordinator may be
// destroyed while detached tasks are still running or waiting in it.
//
//   weft::coordinator db({.max_concurrency = 8, .max_queue = 100, .name = "db"});
//   int rows = co_await db.execute([&]() -> task<int> { co_return co_await query(); });
//   auto hash = co_await db.execute([&] { return sha256(file); });   // blocking: runs on the pool
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include <weft/bounded_elastic.hpp>
#include <weft/detail/coord_ticket.hpp>
#include <weft/detail/coordinated_result.hpp>
#include <weft/detail/run_coordinated.hpp>
#include <weft/errors.hpp>
#include <weft/task.hpp>

namespace weft {

struct coordinator_options {
  std::size_t max_concurrency = 1;  // jobs running at once; at least 1
  std::size_t max_queue = 50;       // jobs waiting for a slot; 0 = refuse whenever all slots are busy
  std::string name;                 // in too_many_tasks' message; "coordinator" when empty
};

// A snapshot. At quiescence every admitted job is in exactly one of
// completed or withdrawn; every refused one is in rejected.
struct coordinator_stats {
  std::size_t running = 0, queued = 0;
  std::uint64_t completed = 0;  // jobs that ran and ended: value, exception or stopped while running
  std::uint64_t rejected = 0;   // arrivals refused with too_many_tasks
  std::uint64_t withdrawn = 0;  // admitted jobs that never ran: their caller stopped while they waited
                                // (in the coordinator's queue, or a blocking job in the pool's)
};

// What execute() accepts: a callable returning task<R> (a coroutine job), or
// one returning R, optionally taking a std::stop_token (a blocking job).
template <class F>
concept coordinator_job =
    std::move_constructible<F> &&
    (detail::coroutine_job<F> ||
     // A callable that needs a std::stop_token to make its task would run on
     // the pool and hand back an unstarted task: refused here.
     (detail::job_callable<F> && !requires { typename detail::task_value<detail::job_result_t<F>>::type; }));

class coordinator {
 public:
  // std::invalid_argument when max_concurrency is 0 or the limits overflow.
  explicit coordinator(coordinator_options = {});
  ~coordinator();
  coordinator(const coordinator&) = delete;
  coordinator& operator=(const coordinator&) = delete;

  // co_await coord.execute(job) -> R. A coroutine job runs on the caller's
  // loop, inside the caller's task; a blocking job runs through offload() on
  // the runtime's bounded_elastic pool. Throws too_many_tasks at once when
  // the coordinator is full, and otherwise what the job throws. A caller
  // cancelled while its job waits or runs stops (cancel.hpp).
  template <class F>
    requires coordinator_job<F>
  task<detail::coordinated_result_t<F>> execute(F job) {
    return detail::run_coordinated(detail::direct_source{state_}, std::move(job));
  }

  // New work is refused from now on (execute throws rejected_execution
  // naming the coordinator); the callers of queued jobs are cancelled, so
  // those jobs never run; running jobs finish. Idempotent; any thread.
  void close() noexcept;

  coordinator_stats stats() const;
  const std::string& name() const noexcept;

 private:
  detail::coordinator_state* state_;
};

}  // namespace weft

// tenants is part of this header's contract (API.md names coordinator.hpp);
// it lives in its own file, which includes this one.
#include <weft/tenants.hpp>
