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
//    them (see detail::elastic_core in lib/elastic_core.hpp).
#pragma once

#include <weft/detail/context.hpp>
#include <weft/errors.hpp>
#include <weft/outcome.hpp>

#include <chrono>
#include <concepts>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>
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

// ThreadPoolExecutor's run states, in the only order they are passed through.
enum class pool_state { running, shutdown, stop, tidying, terminated };

namespace detail {
// The hardware threads, at least 1: std::thread::hardware_concurrency() may
// say 0 ("unknown"), which must not make a pool with no threads. `reported`
// is for tests.
constexpr unsigned cores_or_one(unsigned reported) noexcept { return reported == 0 ? 1 : reported; }
inline unsigned cores() noexcept { return cores_or_one(std::thread::hardware_concurrency()); }
}  // namespace detail

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
  // For tests: consulted before each worker thread is created, with the pool's
  // lock held (so it must not call into the pool); returning true makes the
  // creation fail as pthread_create does with EAGAIN.
  std::function<bool()> fail_thread_start;
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

class bounded_elastic;

namespace detail {

struct elastic_core;    // lib/elastic_core.hpp
struct elastic_access;  // lib/elastic_core.hpp: how tests reach the core

// The intrusive unit the pool queues. Its owner (a `job`, or the pool once
// admitted) calls exactly one of: run then finish, or drop.
struct job_node;
struct job_ops {
  // Runs the callable; keeps its result or exception in the node. Never throws.
  void (*run)(job_node*, std::stop_token pool_stop) noexcept;
  // Delivers the outcome (future, awaiter) and releases the node. Returns an
  // exception nobody else will observe (an execute()d job threw), if any.
  std::exception_ptr (*finish)(job_node*) noexcept;
  // The node will never run: tell whoever waits (rejected_execution with `why`)
  // and release the node.
  void (*drop)(job_node*, const char* why) noexcept;
};
struct job_node {
  const job_ops* ops = nullptr;
  // Pool bookkeeping, guarded by the pool's mutex: the links of the worker
  // queue holding the node, and that queue (null when the node is not
  // queued); the links of the pool's admission order, kept under the
  // discard_oldest policy only (lib/elastic_backlog.hpp).
  job_node* prev = nullptr;
  job_node* next = nullptr;
  void* queue = nullptr;
  job_node* older = nullptr;
  job_node* newer = nullptr;
};

// Why a job ended unrun, as its awaiter or future sees it.
inline constexpr const char* dropped_unrun =
    "weft: the job was destroyed without being run (handed back by shutdown_now, or discarded)";

template <class F>
inline constexpr bool takes_stop_token = std::is_invocable_v<F&, std::stop_token>;

template <class F>
struct job_result {
  using type = std::invoke_result_t<F&>;
};
template <class F>
  requires takes_stop_token<F>
struct job_result<F> {
  using type = std::invoke_result_t<F&, std::stop_token>;
};
template <class F>
using job_result_t = typename job_result<F>::type;

template <class F>
concept job_callable = std::move_constructible<std::decay_t<F>> &&
                       (std::is_invocable_v<std::decay_t<F>&> || takes_stop_token<std::decay_t<F>>);

template <class F>
decltype(auto) invoke_job(F& fn, std::stop_token st) {
  if constexpr (takes_stop_token<F>) {
    return fn(std::move(st));
  } else {
    return fn();
  }
}

// Runs a job and keeps its value or exception in `out` (weft/outcome.hpp).
template <class R, class F>
void capture_job(outcome<R>& out, F& fn, std::stop_token st) noexcept {
  static_assert(!std::is_reference_v<R>, "weft: a job must return by value, not a reference");
  try {
    if constexpr (std::is_void_v<R>) {
      invoke_job(fn, std::move(st));
      outcome_access::set_value(out);
    } else {
      outcome_access::set_value(out, invoke_job(fn, std::move(st)));
    }
  } catch (...) {
    outcome_access::set_error(out, std::current_exception());
  }
}

// A plain job: the callable and, after running, what it threw.
template <class F>
struct fn_node final : job_node {
  F fn;
  std::exception_ptr error;

  explicit fn_node(F f) : fn(std::move(f)) { ops = &table; }
  static void run(job_node* n, std::stop_token st) noexcept {
    auto* self = static_cast<fn_node*>(n);
    try {
      invoke_job(self->fn, std::move(st));
    } catch (...) {
      self->error = std::current_exception();
    }
  }
  static std::exception_ptr finish(job_node* n) noexcept {
    auto* self = static_cast<fn_node*>(n);
    std::exception_ptr e = std::move(self->error);
    delete self;
    return e;
  }
  static void drop(job_node* n, const char*) noexcept { delete static_cast<fn_node*>(n); }
  static constexpr job_ops table{&run, &finish, &drop};
};

// A submit()ted job: the outcome is kept until finish so that the pool's
// figures are updated before the future becomes ready.
template <class F, class R>
struct promise_node final : job_node {
  F fn;
  std::promise<R> promise;
  outcome<R> out;

  explicit promise_node(F f) : fn(std::move(f)) { ops = &table; }
  static void run(job_node* n, std::stop_token st) noexcept {
    auto* self = static_cast<promise_node*>(n);
    capture_job(self->out, self->fn, std::move(st));
  }
  static std::exception_ptr finish(job_node* n) noexcept {
    auto* self = static_cast<promise_node*>(n);
    try {
      if (std::exception_ptr e = self->out.error()) {
        self->promise.set_exception(std::move(e));
      } else if constexpr (std::is_void_v<R>) {
        self->promise.set_value();
      } else {
        self->promise.set_value(outcome_access::take(self->out));
      }
    } catch (...) {
      // set_value can only fail if R's move throws; the future then carries that.
      self->promise.set_exception(std::current_exception());
    }
    delete self;
    return nullptr;
  }
  static void drop(job_node* n, const char* why) noexcept {
    auto* self = static_cast<promise_node*>(n);
    self->promise.set_exception(std::make_exception_ptr(rejected_execution(why)));
    delete self;
  }
  static constexpr job_ops table{&run, &finish, &drop};
};

// Entry points into lib/bounded_elastic.cpp.
enum class admitted {
  queued,       // the pool owns the node now
  run_here,     // caller_runs: the caller must run then finish it
  discarded,    // the caller must drop it, with `why`
};
// Offers `n` to the pool. Throws rejected_execution (abort policy, or no
// thread could be started); `n` then still belongs to the caller, undelivered.
admitted elastic_admit(elastic_core* c, job_node* n, const char** why);
// Removes a still-queued node so it never runs. Returns false when the pool no
// longer holds it (running, finished, dropped or handed back).
bool elastic_withdraw(elastic_core* c, job_node* n) noexcept;
std::stop_token elastic_stop_token(elastic_core* c) noexcept;
void elastic_retain(elastic_core* c) noexcept;
void elastic_release(elastic_core* c) noexcept;

template <class F>
class run_awaiter;

}  // namespace detail

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
  void execute(F&& fn) {
    if constexpr (std::same_as<std::decay_t<F>, job>) {
      static_assert(!std::is_lvalue_reference_v<F>, "weft: pass a job to execute() with std::move");
      job j = std::move(fn);
      admit_owned(j.release());
    } else {
      admit_owned(new detail::fn_node<std::decay_t<F>>(std::forward<F>(fn)));
    }
  }

  // For plain threads: the future carries the value, the exception, or
  // rejected_execution if the job was dropped unrun. Throws rejected_execution
  // itself under the abort policy.
  template <class F>
    requires detail::job_callable<F> && (!std::same_as<std::decay_t<F>, job>)
  auto submit(F&& fn) -> std::future<detail::job_result_t<std::decay_t<F>>> {
    using R = detail::job_result_t<std::decay_t<F>>;
    auto* n = new detail::promise_node<std::decay_t<F>, R>(std::forward<F>(fn));
    std::future<R> f = n->promise.get_future();
    admit_owned(n);
    return f;
  }

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
  template <class F>
  friend class detail::run_awaiter;
  friend struct detail::elastic_access;
  // Admits a heap node the pool may delete: runs it here (caller_runs) or
  // drops it (discard) as told; on a throw, deletes it undelivered.
  void admit_owned(detail::job_node* n);

  detail::elastic_core* core_;
};

namespace detail {

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

}  // namespace detail

template <class F>
  requires detail::job_callable<F>
detail::run_awaiter<std::decay_t<F>> bounded_elastic::run(F&& fn) {
  return detail::run_awaiter<std::decay_t<F>>(core_, std::forward<F>(fn));
}

}  // namespace weft
