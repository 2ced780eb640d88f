// weft/detail/context.hpp — the seam between coroutine types and the event loops.
//
// Every strand of execution weft runs (a spawned task, or a child of when_all,
// when_any or timeout) has a task_context: the loop queues it, resumes its
// innermost suspended coroutine, delivers cancellation to it, and stops it.
//
// Ground rules, which every suspension point in weft follows:
//  * A context runs on one loop, its `home`, from its first resumption until it
//    finishes. Only work that has never run may be stolen by another loop (a
//    when_all child's context, or a spawned task's join cell, whose context
//    the claiming loop builds: see join_handle.hpp). So everything a
//    suspended task is parked on (a timer, a lock queue) is touched by the
//    home loop alone, and `hook` needs no synchronisation.
//  * Cancellation is a completion, not an exception. A cancelled strand is
//    never resumed: the loop *stops* it instead (stop_strand in context.cpp),
//    destroying its chain of coroutine frames from the innermost one outwards
//    (destructors run, catch blocks do not), then finishing the context as
//    stopped. The rule is applied in one place: whenever the loop is about to
//    resume a parked context and is_cancelled() holds, it stops it. So a
//    suspension point needs no cancelled path in await_resume, and whatever
//    it obtained meanwhile (a lock grant, a coordinator slot, a job's result)
//    is given back by its awaiter's destructor as the frame goes.
//  * A suspension point, in await_suspend: reads current_context(); if
//    stop_if_cancelled(ctx, h) it returns true (the context is queued to be
//    stopped); otherwise it records `resume_point` and `hook`, parks itself,
//    suspends. A point that can complete without suspending checks
//    cancellation first all the same: every weft suspension point is a
//    cancellation point.
//  * Exactly one wake per suspension. Whoever ends the wait (the event, or the
//    hook's on_cancel after releasing what the task waited on) calls wake(ctx)
//    once. A wake on the home loop clears `hook` at once, so a cancel
//    delivered before the context runs finds no hook (the resumption then
//    stops it). A wake from another thread cannot touch `hook`: there the
//    event and the hook must agree through their own atomic who wakes (see
//    join_handle's `joiner`).
//  * request_cancel() may be called from any thread; delivery (calling the
//    hook's on_cancel) always happens on the home loop, never on the caller's
//    stack, which is what keeps cancellation free of lock-order problems.
//  * While `shield` is non-zero (shielded(), cancel.hpp) the strand is not
//    cancelled as far as is_cancelled() and delivery are concerned; the
//    request stays in `flags` and takes effect at the first suspension point
//    after the shield.
//  * `top` is the innermost weft coroutine the strand is running or parked
//    in (task.hpp keeps it as tasks await each other); stopping walks from it
//    to the root through promise_base::parent.
//  * A cancel delivery in flight keeps the context from being reported
//    quiesced: the strand finishing and the delivery being processed both
//    happen on the home loop, and whichever comes second calls `quiesced`.
//    Owners (a join handle, a when_all) may rely on the context's memory
//    until then.
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

// What a suspended task is parked on. The home loop calls on_cancel when the
// task is cancelled while parked; the hook unparks it and decides when to wake
// it (at once, or after something it must wait for, such as a running job).
struct cancel_hook {
  void (*on_cancel)(cancel_hook*) noexcept = nullptr;
};

struct task_context;

// The queued delivery of a cancel request to a context's home loop.
struct cancel_message : sched_node {
  task_context* target = nullptr;
};

struct task_context : sched_node {
  // flags: cancel_bit — cancellation requested (sticky);
  //        started_bit — the home loop has claimed the context (home is set);
  //        done_bit — the strand finished, hook is null for good;
  //        delivery_bit — cancel_msg is queued on the home loop.
  static constexpr std::uint32_t cancel_bit = 1u << 0;
  static constexpr std::uint32_t started_bit = 1u << 1;
  static constexpr std::uint32_t done_bit = 1u << 2;
  static constexpr std::uint32_t delivery_bit = 1u << 3;
  std::atomic<std::uint32_t> flags{0};
  std::uint32_t shield = 0;                // shielded() sections entered (home loop); packs beside flags

  loop* home = nullptr;                    // written before started_bit (release)
  cancel_hook* hook = nullptr;             // home loop only
  std::coroutine_handle<> resume_point;    // home loop only (or before start)
  promise_base* top = nullptr;             // innermost weft coroutine (home loop, or before start)
  cancel_message cancel_msg;
  task_context* live_prev = nullptr;       // home loop's list of started, unfinished contexts
  task_context* live_next = nullptr;
  // The strand ended: its root coroutine finished (stopped == false; the
  // owner takes its result), or it stopped — cancelled while parked, or
  // before it ever ran (stopped == true; no result). Home loop. The owner
  // destroys the root frame here, which is in `resume_point`.
  void (*finished)(task_context*, bool stopped) noexcept = nullptr;
  // Finished and no cancel delivery in flight: the owner may now free or reuse
  // the context. Called exactly once, on the home loop.
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
  // This thread's small-block pool (detail/block_pool.hpp), made on first use
  // and retired when the thread exits.
  block_heap* heap = nullptr;
  bool heap_retired = false;
  thread_state() = default;
  thread_state(const thread_state&) = delete;
  thread_state& operator=(const thread_state&) = delete;
  ~thread_state();
};
thread_state& this_thread() noexcept;

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
// cancelled, parks h and queues ctx on its loop, where it is stopped instead
// of resumed, and returns true (the caller returns true: suspend). Otherwise
// false, and the suspension point goes on to park or complete.
bool stop_if_cancelled(task_context* ctx, std::coroutine_handle<> h) noexcept;

// Schedule ctx->resume_point on ctx's home loop. Any thread; once per suspension.
void wake(task_context* ctx) noexcept;

// Resume ctx (the current context) on the current loop after the loop has
// looked at its timers and completions once more: what yield() does.
void defer(task_context* ctx) noexcept;

// Ask ctx to stop. Any thread, any number of times; delivered on its home loop.
void request_cancel(task_context* ctx) noexcept;

// sched_node::run of a context that has never run: makes the running loop its
// home, then runs it, or drops it unrun when it was cancelled first.
void claim_context(sched_node* n) noexcept;

// Queue a never-run context on the current loop, where an idle loop may
// steal it (when_all's children). std::logic_error off a loop thread.
void start_on_current_loop(task_context* ctx);
// Queue a never-run context to run on the current loop and nowhere else
// (timeout's child, which shares the loop's timer with its parent).
void start_local(task_context* ctx);
// Queue a node whose run starts a task (a spawned task's join cell) on the
// current loop and nowhere else (a scheduled job's run).
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
