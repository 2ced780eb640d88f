// weft/detail/context.hpp — the seam between coroutine types and the event loops.
//
// Every strand of execution weft runs (a spawned task, or a child of when_all,
// when_any or timeout) has a task_context: a loop queues it, resumes its
// innermost suspended coroutine, hands it cancellation, and stops it.
//
// Ground rules, which every suspension point in weft follows:
//  * A context has no fixed loop. Whenever it is runnable it sits in some
//    loop's stealable run queue (or the runtime's inject queue), and any loop
//    of its runtime may take it and run it there: a task migrates between its
//    suspensions, never during one. `flags` (below) makes "runnable",
//    "running" and "parked" one atomic state, so exactly one loop runs a
//    context at a time and a wake never queues it twice.
//  * What a task parks on is not owned by a loop: timers sit in the wheel of
//    the loop that armed them, behind that wheel's lock, and any loop may
//    disarm or fire them; locks, join cells, the pool and the coordinator
//    synchronise on their own. So a task woken by a peer simply runs where
//    it was woken.
//  * Cancellation is a completion, not an exception. A cancelled strand is
//    never resumed: it is *stopped* (stop_strand in context.cpp), its chain
//    of coroutine frames destroyed from the innermost one outwards
//    (destructors run, catch blocks do not), and its context finished as
//    stopped. The rule is applied in one place, run_context: a context that
//    is about to be resumed while is_cancelled() holds is stopped instead. So
//    a suspension point needs no cancelled path in await_resume, and whatever
//    it obtained meanwhile (a lock grant, a coordinator slot, a job's result)
//    is given back by its awaiter's destructor as the frame goes.
//  * A suspension point, in await_suspend: reads current_context(); if
//    stop_if_cancelled(ctx, h) it returns true (the context is queued to be
//    stopped); otherwise it records `resume_point` and `hook`, parks itself,
//    suspends. A point that can complete without suspending checks
//    cancellation first all the same: every weft suspension point is a
//    cancellation point.
//  * Exactly one wake per suspension. Whoever ends the wait (the event, or
//    the hook's on_cancel after releasing what the task waited on) calls
//    wake(ctx) once, from any thread; the event and the hook agree through
//    their own atomic, lock or timer wheel on which of them that is. A wake
//    that arrives while the context is still running (its await_suspend has
//    published it and not yet returned) is kept in `flags` and acted on by
//    the loop when the run ends, so a context never runs on two loops.
//  * request_cancel() may be called from any thread. It sets cancel_bit, and
//    if the context is parked it queues it (as a wake does, but without
//    ending the wait): the loop that runs it then calls the hook's on_cancel,
//    on that loop's stack, never on the canceller's, which keeps cancellation
//    free of lock-order problems. on_cancel releases what the task waited on
//    and leads to the one wake; the resumption then stops the strand.
//  * `hook`, `resume_point`, `top`, `shield` and `yielded` belong to whoever
//    runs the context: only a running context (or one never run) reads or
//    writes them, and the flags word's acquire/release hand them from one
//    runner to the next.
//  * While `shield` is non-zero (shielded(), cancel.hpp) the strand is not
//    cancelled as far as is_cancelled() and on_cancel are concerned; the
//    request stays in `flags` and takes effect at the first suspension point
//    after the shield.
//  * `top` is the innermost weft coroutine the strand is running or parked
//    in (task.hpp keeps it as tasks await each other); stopping walks from it
//    to the root through promise_base::parent.
//  * `finished` and then `quiesced` are called once, on the loop that ran the
//    strand's end; the owner may free the context in `quiesced`. No queue or
//    canceller holds it by then: a queued context is not finished, and a
//    canceller touches it only inside request_cancel (owners keep the context
//    alive across that call; see join_handle's pins).
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <functional>

namespace weft::detail {

class loop;           // lib/loop.hpp
struct promise_base;  // task.hpp

// A unit of work a loop runs: an intrusive queue link and what to do with it.
struct sched_node {
  sched_node* next = nullptr;
  void (*run)(sched_node*) noexcept = nullptr;
};

// What a suspended task is parked on. The loop that runs a context cancelled
// while parked calls on_cancel (any loop of the runtime); the hook unparks it
// and decides when to wake it (at once, or after something it must wait for,
// such as a running job), agreeing with the event on who wakes.
struct cancel_hook {
  void (*on_cancel)(cancel_hook*) noexcept = nullptr;
};

struct task_context : sched_node {
  // flags: the context's state, one atomic word.
  //   cancel_bit   cancellation requested (sticky)
  //   done_bit     the strand finished; nothing queues or runs it again
  //   queued_bit   it sits in a run queue; whoever pops it runs it
  //   running_bit  a loop is running it (claimed, resumed, or handing it
  //                cancellation)
  //   woken_bit    the wait of its current suspension is over (a wake came,
  //                or it asked to be run again: yield, a cancelled point)
  // Parked: none of queued, running, done. wake() and request_cancel() move a
  // parked context to queued and push it; while queued or running they only
  // record their bit, and the run's end re-queues a context woken meanwhile.
  static constexpr std::uint32_t cancel_bit = 1u << 0;
  static constexpr std::uint32_t done_bit = 1u << 1;
  static constexpr std::uint32_t queued_bit = 1u << 2;
  static constexpr std::uint32_t running_bit = 1u << 3;
  static constexpr std::uint32_t woken_bit = 1u << 4;
  std::atomic<std::uint32_t> flags{0};
  std::uint32_t shield = 0;                // shielded() sections entered (the runner's)
  bool yielded = false;                    // yield(): queue behind this turn's timers (the runner's)

  loop* last = nullptr;                    // the loop that ran it last (the runner's; wakers read it)
  cancel_hook* hook = nullptr;             // the runner's
  std::coroutine_handle<> resume_point;    // the runner's (or before start)
  promise_base* top = nullptr;             // innermost weft coroutine (the runner's, or before start)
  loop* live_owner = nullptr;              // whose live list holds it (for shutdown), from its first park
  task_context* live_prev = nullptr;       // that list's links, under its lock
  task_context* live_next = nullptr;
  // The strand ended: its root coroutine finished (stopped == false; the
  // owner takes its result), or it stopped — cancelled while parked, or
  // before it ever ran (stopped == true; no result). The owner destroys the
  // root frame here, which is in `resume_point`.
  void (*finished)(task_context*, bool stopped) noexcept = nullptr;
  // Then: the owner may now free or reuse the context. Called exactly once.
  void (*quiesced)(task_context*) noexcept = nullptr;
};

// The thread's view of weft: the loop it runs (if any), the context being run,
// and the trampoline that turns coroutine-to-coroutine transfers into a loop.
struct driver {
  std::coroutine_handle<> next;
};
struct block_heap;  // lib/block_pool.cpp
struct thread_state {
  loop* current_loop = nullptr;
  task_context* current = nullptr;
  driver* active = nullptr;
  // The context being run finished during its run and may be gone: the loop
  // must not touch it again (set by the strand's end, read by run_context).
  bool current_ended = false;
  // This thread's small-block pool (detail/block_pool.hpp), made on first use
  // and retired when the thread exits.
  block_heap* heap = nullptr;
  bool heap_retired = false;
  thread_state() = default;
  thread_state(const thread_state&) = delete;
  thread_state& operator=(const thread_state&) = delete;
  ~thread_state();
};
[[gnu::noinline]] thread_state& this_thread() noexcept;  // see lib/context.cpp

inline task_context* current_context() noexcept { return this_thread().current; }

// Hand control to `next` from an await_suspend. Under a driver the transfer
// goes back through the driver's loop, so a chain of a million nested awaits
// uses constant stack whether or not the compiler emits the tail call that
// symmetric transfer relies on (GCC does not at -O0 or under sanitizers).
// Outside a driver (a foreign coroutine awaiting a weft task) it is plain
// symmetric transfer.
inline std::coroutine_handle<> transfer(thread_state& ts, std::coroutine_handle<> next) noexcept {
  if (driver* d = ts.active) {
    d->next = next;
    return std::noop_coroutine();
  }
  return next;
}
inline std::coroutine_handle<> transfer(std::coroutine_handle<> next) noexcept {
  return transfer(this_thread(), next);
}

// Resume `h` and everything it transfers to, until the chain parks.
void drive(std::coroutine_handle<> h) noexcept;

// Cancellation requested for this context, or its loop is shutting down,
// and the strand is not inside shielded().
bool is_cancelled(const task_context* ctx) noexcept;

// A suspension point's cancellation check, in await_suspend: if ctx is
// cancelled, parks h and has ctx run again once this run ends, when it is
// stopped instead of resumed, and returns true (the caller returns true: suspend). Otherwise
// false, and the suspension point goes on to park or complete.
bool stop_if_cancelled(task_context* ctx, std::coroutine_handle<> h) noexcept;

// The wait is over: ctx->resume_point runs on the waking loop, or, woken from
// a thread that is not one of its runtime's loops (a pool thread), on the
// loop that ran it last; an idle or stuck-behind peer may take it from
// either. Any thread; once per suspension.
void wake(task_context* ctx) noexcept;

// Run ctx (the current context) again after this loop has looked at its
// timers and completions once more (a peer may take it meanwhile): what
// yield() does.
void defer(task_context* ctx) noexcept;

// Ask ctx to stop. Any thread, any number of times; handed to the context by
// whichever loop runs it next.
void request_cancel(task_context* ctx) noexcept;

// sched_node::run of a context that has never run: joins it to the running
// loop's runtime and runs it, or drops it unrun when it was cancelled first.
void claim_context(sched_node* n) noexcept;

// Queue a never-run context on the current loop, where an idle loop may
// steal it (when_all's children). std::logic_error off a loop thread.
void start_on_current_loop(task_context* ctx);
// Queue a never-run context to run first on the current loop, where no peer
// takes it (timeout's child, which starts right behind its parent); after
// its first suspension it moves like any other.
void start_local(task_context* ctx);
// Queue a node whose run starts a task (a spawned task's join cell) on the
// current loop, where no peer takes it: scheduled runs due at the same time
// start in the order they fired.
void start_node_local(sched_node* n);

// Where exceptions nobody will observe go (a detached task, a periodic job):
// runtime_options::on_error, or stderr. Shared by the runtime and by any join
// handle holding a failed outcome, so a handle dropped after its runtime is
// gone still reports safely.
struct error_sink {
  std::atomic<std::uint32_t> refs{1};
  std::function<void(std::exception_ptr)> on_error;

  void report(std::exception_ptr e) noexcept;
  void add_ref() noexcept {
    // relaxed: taken by a party that already reaches the sink through a live runtime.
    refs.fetch_add(1, std::memory_order_relaxed);
  }
  void drop_ref() noexcept {
    // acq_rel: the last owner deletes, after everyone else's use.
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
};

// The sink of the calling loop's runtime; null off a loop thread.
error_sink* current_error_sink() noexcept;

}  // namespace weft::detail
