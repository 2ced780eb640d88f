// weft/bounded_elastic.hpp — the pool for blocking work: bounded, elastic, evicting.
//
// Owns: `job` (weft's move-only void() callable), the pool's options, stats and
// lifecycle, and the three ways in: execute (fire and forget), submit (a
// std::future, for plain threads) and run (co_await from a task, resuming on
// the task's own loop). offload() lives in weft/offload.hpp.
//
// Guarantees, modelled on Reactor's boundedElastic() with the lifecycle,
// policies and figures of Java's ThreadPoolExecutor:
//  * Threads start on demand, never more than max_threads; each has a queue of
//    at most max_queued_per_thread jobs. A new job goes to an idle worker, else
//    to a new worker (below the cap), else to the busy worker with the fewest
//    queued; when every queue is full the rejection policy applies.
//    Among idle workers the most recently idle is picked (its cache is warm,
//    and the others age out); among equally busy ones, the first started
//    (the lowest-numbered worker slot: a new thread takes the lowest free one).
//  * No job waits while a worker is idle: a worker whose queue is empty takes
//    the oldest job of the busiest worker before it goes idle.
//  * Every job is run, handed back (shutdown_now) or dropped exactly once; a
//    dropped job's submitter or awaiter gets rejected_execution, so nothing
//    waits forever. A job that throws never kills its worker.
//  * The pool's internals outlive this object while an awaiter can still reach
//    them (see detail::elastic_core in lib/blocking/elastic_core.hpp).
//
// Read from the top: the policies and states, the options, the figures, the
// pool, then `job`; the templates' bodies come last. The machinery they use
// lives in weft/detail/: the job node and its kinds (job_node.hpp,
// fn_node.hpp, promise_node.hpp), the callable rules (job_invoke.hpp), the
// core's entry points (elastic_entry.hpp) and the awaiter behind run()
// (run_awaiter.hpp).
#pragma once

#include <weft/detail/elastic_entry.hpp>
#include <weft/detail/fn_node.hpp>
#include <weft/detail/hardware_threads.hpp>
#include <weft/detail/job_invoke.hpp>
#include <weft/detail/job_node.hpp>
#include <weft/detail/promise_node.hpp>
#include <weft/detail/run_awaiter.hpp>
#include <weft/errors.hpp>

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace weft {

// What happens to a job the pool cannot take (every worker at the cap, every
// queue full) or that arrives after shutdown.
enum class rejection_policy {
  abort,           // throw rejected_execution
  caller_runs,     // run it on the submitting thread. On a loop thread this blocks
                   // the loop (every task on it) for the job's duration. After
                   // shutdown the job is discarded instead, as in Java.
  discard,         // drop the new job; its future or awaiter gets rejected_execution
  discard_oldest,  // drop the job that has waited longest in any worker's queue (as Java's
                   // DiscardOldestPolicy drops the head of its one queue) and queue the new
                   // one in its place, at the back of that worker's queue
};

// ThreadPoolExecutor's run states, in the only order they are passed through:
// running; shutdown (after shutdown()) or stop (after shutdown_now());
// tidying, once no worker and no queued job is left, where Java runs its
// terminated() hook (weft has none, so the pool moves on at once); terminated.
enum class pool_state { running, shutdown, stop, tidying, terminated };

struct elastic_options {
  unsigned max_threads = 10 * detail::cores();  // 10 per hardware thread (counted as 1 when unknown)
  std::size_t max_queued_per_thread = 100'000;
  std::chrono::milliseconds ttl = std::chrono::seconds(60);  // idle workers above core_threads exit after this
  unsigned core_threads = 0;                                 // kept alive when idle; not started in advance
  rejection_policy on_reject = rejection_policy::abort;
  std::string name = "weft-elastic";  // threads are named NAME-N (N from 1), NAME cut to fit Linux's 15 characters
  // An exception escaping an execute()d job, which nobody else can observe.
  // Default: printed to stderr. Called on the worker that ran the job, with no
  // pool lock held, possibly from several workers at once.
  std::function<void(std::exception_ptr)> on_error;
};

// The figures ThreadPoolExecutor exposes, each counting every job once. At
// quiescence (nothing being submitted or finishing)
//   submitted == completed + withdrawn + returned + queued + active + evicted,
// where `evicted` are the queued jobs discard_oldest dropped (counted in
// `rejected` as well, the one overlap).
struct elastic_stats {
  std::size_t pool_size = 0;          // live worker threads
  std::size_t active = 0;             // jobs running now
  std::size_t idle = 0;               // workers waiting for work
  std::size_t largest_pool_size = 0;  // the most live workers ever at once
  std::size_t queued = 0;             // jobs waiting in worker queues
  std::uint64_t submitted = 0;        // jobs the pool accepted (queued or handed to a worker); refusals excluded
  std::uint64_t completed = 0;        // accepted jobs a worker ran to the end (normally or by throwing)
  std::uint64_t rejected = 0;         // jobs refused at submission (whatever the policy then did: thrown,
                                      // run by the caller, discarded), plus queued jobs evicted by
                                      // discard_oldest
  std::uint64_t withdrawn = 0;        // accepted jobs removed from the queue unrun: their awaiter was cancelled
  std::uint64_t returned = 0;         // accepted jobs handed back unrun by shutdown_now()
};

class job;  // weft's move-only void() callable, below

class bounded_elastic {
 public:
  // Throws std::invalid_argument naming the option when max_threads == 0,
  // max_queued_per_thread == 0, ttl <= 0 or core_threads > max_threads.
  explicit bounded_elastic(elastic_options = {});
  // shutdown(), then waits for termination: queued work runs first. Must not
  // be called from one of the pool's own workers.
  ~bounded_elastic();
  bounded_elastic(const bounded_elastic&) = delete;
  bounded_elastic& operator=(const bounded_elastic&) = delete;

  // Fire and forget. An exception the job throws goes to options.on_error.
  // Throws rejected_execution under the abort policy; under caller_runs the
  // job runs here and what it throws propagates.
  template <class F>
    requires detail::job_callable<F>
  void execute(F&& fn);

  // For plain threads: the future carries the value, the exception, or
  // rejected_execution if the job was dropped unrun. Throws rejected_execution
  // itself under the abort policy.
  template <class F>
    requires detail::job_callable<F> && (!std::same_as<std::decay_t<F>, job>)
  auto submit(F&& fn) -> std::future<detail::job_result_t<std::decay_t<F>>>;

  // co_await pool.run(fn) -> the value fn returns (or its exception), resumed
  // on the awaiting task's own loop. A cancellation point: if the task is
  // cancelled while the job is queued, the job never runs; while it runs, it
  // is asked to stop (if it takes a std::stop_token) and awaited, then
  // `cancelled` is thrown. Throws std::logic_error off a loop thread.
  // GCC 12 destroys a lambda's init-captures twice when the lambda is a
  // temporary inside a co_await expression: give a callable that owns
  // resources a name and std::move it in (`auto f = [p = std::move(p)]{...};
  // co_await pool.run(std::move(f));`).
  template <class F>
    requires detail::job_callable<F>
  detail::run_awaiter<std::decay_t<F>> run(F&& fn);

  void shutdown();                // no new work; queued work still runs
  std::vector<job> shutdown_now();  // no new work; queued jobs are returned unrun, running ones asked to stop
  bool await_termination(std::chrono::nanoseconds);  // true once terminated, false if `d` ran out first
  bool is_shutdown() const noexcept;
  bool is_terminated() const noexcept;
  pool_state state() const noexcept;
  elastic_stats stats() const;

 private:
  friend struct detail::elastic_access;  // tests only (lib/blocking/elastic_core.hpp)
  // Admits a heap node the pool may delete: runs it here (caller_runs) or
  // drops it (discard) as told; on a throw, deletes it undelivered.
  void admit_owned(detail::job_node* n);

  detail::elastic_core* core_;
};

// weft's move-only void() callable. It runs at most once: calling it consumes
// it (it is empty afterwards). A job destroyed without being run tells
// whoever waits on it (a submit()'s future, a run()'s awaiter) with
// rejected_execution, so nothing waits forever.
class job {
 public:
  job() noexcept = default;
  template <class F>
    requires(!std::same_as<std::decay_t<F>, job>) && detail::job_callable<F>
  job(F&& fn)  // NOLINT(google-explicit-constructor): a job is made from any callable
      : node_(new detail::fn_node<std::decay_t<F>>(std::forward<F>(fn))) {}
  explicit job(detail::job_node* n) noexcept : node_(n) {}
  job(job&& o) noexcept : node_(std::exchange(o.node_, nullptr)) {}
  job& operator=(job&& o) noexcept {
    if (this != &o) {
      reset();
      node_ = std::exchange(o.node_, nullptr);
    }
    return *this;
  }
  job(const job&) = delete;
  job& operator=(const job&) = delete;
  ~job() { reset(); }

  explicit operator bool() const noexcept { return node_ != nullptr; }

  // Runs the job on this thread. What a plain (or execute()d) callable throws
  // is rethrown here; a submit()ted or awaited job delivers its outcome to its
  // future or awaiter instead. An empty job throws std::bad_function_call.
  void operator()() { (*this)(std::stop_token{}); }
  // As above; a callable taking a std::stop_token gets `st`.
  void operator()(std::stop_token st) {
    if (!node_) throw std::bad_function_call();
    detail::job_node* n = std::exchange(node_, nullptr);
    n->ops->run(n, std::move(st));
    if (std::exception_ptr e = n->ops->finish(n)) std::rethrow_exception(e);
  }

  // Gives up ownership of the node without running or dropping it.
  detail::job_node* release() noexcept { return std::exchange(node_, nullptr); }

 private:
  void reset() noexcept {
    if (detail::job_node* n = std::exchange(node_, nullptr)) n->ops->drop(n, detail::dropped_unrun);
  }
  detail::job_node* node_ = nullptr;
};

// The pool's templates, defined here where `job` is complete.

template <class F>
  requires detail::job_callable<F>
void bounded_elastic::execute(F&& fn) {
  if constexpr (std::same_as<std::decay_t<F>, job>) {
    static_assert(!std::is_lvalue_reference_v<F>, "weft: pass a job to execute() with std::move");
    job j = std::move(fn);
    admit_owned(j.release());
  } else {
    admit_owned(new detail::fn_node<std::decay_t<F>>(std::forward<F>(fn)));
  }
}

template <class F>
  requires detail::job_callable<F> && (!std::same_as<std::decay_t<F>, job>)
auto bounded_elastic::submit(F&& fn) -> std::future<detail::job_result_t<std::decay_t<F>>> {
  using R = detail::job_result_t<std::decay_t<F>>;
  auto* n = new detail::promise_node<std::decay_t<F>, R>(std::forward<F>(fn));
  std::future<R> f = n->promise.get_future();
  admit_owned(n);
  return f;
}

template <class F>
  requires detail::job_callable<F>
detail::run_awaiter<std::decay_t<F>> bounded_elastic::run(F&& fn) {
  return detail::run_awaiter<std::decay_t<F>>(core_, std::forward<F>(fn));
}

}  // namespace weft
