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

#include <atomic>
#include <concepts>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>

#include <weft/bounded_elastic.hpp>
#include <weft/detail/context.hpp>
#include <weft/errors.hpp>
#include <weft/offload.hpp>
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

namespace detail {

struct coordinator_state;  // lib/coordinator_state.hpp

template <class T>
struct task_value {};
template <class T>
struct task_value<task<T>> {
  using type = T;
};

// F returns a task<R>: the job is that coroutine, run in the caller's task.
template <class F>
concept coroutine_job = std::is_invocable_v<F&> &&
                        requires { typename task_value<std::remove_cvref_t<std::invoke_result_t<F&>>>::type; };

template <class F>
struct coordinated_result {
  using type = job_result_t<F>;  // a blocking job: what it returns
};
template <coroutine_job F>
struct coordinated_result<F> {
  using type = typename task_value<std::remove_cvref_t<std::invoke_result_t<F&>>>::type;
};
template <class F>
using coordinated_result_t = typename coordinated_result<F>::type;

// One job's passage through a coordinator, living in the job's frame: it is
// the admission awaitable, the queue link, the cancel hook while queued, and
// the slot it holds while running. Its destructor gives back whatever it
// holds, so every way out of the frame (co_return, an exception, a cancelled
// wait) releases the job's work in progress, and `retired_` makes that
// release happen exactly once.
//
// Who wakes a queued job, exactly once: the job that frees a slot (the
// grant), or the cancel hook (the withdrawal). Both decide under the
// coordinator's mutex by moving `phase` out of `queued`; the loser does nothing.
class coord_ticket final : cancel_hook {
 public:
  enum class phase : std::uint8_t {
    outside,    // not admitted (not yet awaited, refused, or cancelled first): holds nothing
    queued,     // admitted, in the FIFO queue
    granted,    // holds a running slot
    withdrawn,  // admitted, left the queue (or a granted slot) without running
  };

  explicit coord_ticket(coordinator_state* s) noexcept : state_(s) { on_cancel = &cancel_while_queued; }
  coord_ticket(const coord_ticket&) = delete;
  coord_ticket& operator=(const coord_ticket&) = delete;
  ~coord_ticket() {
    if (phase_ != phase::outside) leave();
  }

  bool await_ready() const noexcept { return false; }
  // Queues the job (true), or does not suspend (false): the job was granted a
  // slot, or refused. A caller already cancelled is not admitted and stops
  // (true). std::logic_error outside a weft task.
  bool await_suspend(std::coroutine_handle<> h);
  // Throws too_many_tasks if refused; otherwise the job holds a slot and runs.
  void await_resume();
  // Where the job counts as started (else its granted slot goes back unrun,
  // counted withdrawn): run_coordinated sets it before a coroutine job runs,
  // and a blocking job sets it on the pool thread (start_marked).
  bool* ran_flag() noexcept { return &ran_; }

 private:
  friend struct coordinator_state;
  static void cancel_while_queued(cancel_hook* h) noexcept;
  void leave() noexcept;  // the frame ends: gives back the slot it held, then retires
  void retire() noexcept;

  coordinator_state* state_;
  task_context* ctx_ = nullptr;
  // The queue links and phase_ (while the ticket is queued) are guarded by
  // the coordinator's mutex; once the task is resumed phase_ is its own.
  coord_ticket* prev_ = nullptr;
  coord_ticket* next_ = nullptr;
  phase phase_ = phase::outside;
  bool closed_out_ = false;  // refused because the coordinator is closed
  bool ran_ = false;  // the job started (see ran_flag)
  std::size_t refused_at_ = 0;    // refused: the work in progress it would have made
  // The job's unit of work in progress has been given back. A CAS from false
  // is the only way to give it back, so it happens once whatever path (the
  // frame ending, a withdrawal) gets there first.
  std::atomic<bool> retired_{false};
};

// A Source names where the job is admitted; its lease is taken when the task
// starts (not when it is created) and given back after the ticket.
struct direct_source {
  coordinator_state* state;
  struct lease {
    coordinator_state* s;
    explicit lease(direct_source src) noexcept : s(src.state) {}
    coordinator_state* state() const noexcept { return s; }
  };
};

// A blocking job that records, on the pool thread, that it was started: a
// job withdrawn from the pool's queue (its caller stopped first) never ran
// and is counted withdrawn, not completed. The flag is read on the caller's
// loop after the pool's wake, which orders it.
template <class F>
struct start_marked {
  F fn;
  bool* started;
  template <class... A>
  auto operator()(A&&... a) -> decltype(fn(std::forward<A>(a)...)) {
    *started = true;
    return fn(std::forward<A>(a)...);
  }
};

template <class Source, class F>
task<coordinated_result_t<F>> run_coordinated(Source src, F job) {
  typename Source::lease lease(std::move(src));  // declared first: outlives the ticket
  coord_ticket ticket(lease.state());
  co_await ticket;
  if constexpr (coroutine_job<F>) {
    *ticket.ran_flag() = true;
    // `job` stays in this frame until its task has finished.
    co_return co_await std::invoke(job);
  } else {
    // The awaiter owns the callable until the pool has finished with it.
    start_marked<F> marked{std::move(job), ticket.ran_flag()};
    co_return co_await offload(std::move(marked));
  }
}

}  // namespace detail

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
