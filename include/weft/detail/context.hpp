// weft/detail/context.hpp — the seam between coroutine types and the event loops.
//
// Every strand of execution weft runs (a spawned task, or a child of when_all,
// when_any or timeout) has a task_context: the loop queues it, resumes its
// innermost suspended coroutine, and delivers cancellation to it.
//
// Ground rules, which every suspension point in weft follows:
//  * A context runs on one loop, its `home`, from its first resumption until it
//    finishes. Only work that has never run may be stolen by another loop (a
//    when_all child's context, or a spawned task's join cell, whose context
//    the claiming loop builds: see join_handle.hpp). So everything a
//    suspended task is parked on (a timer, a lock queue) is touched by the
//    home loop alone, and `hook` needs no synchronisation.
//  * A suspension point, in await_suspend: reads current_context(); if
//    is_cancelled() it does not suspend and its await_resume throws cancelled;
//    otherwise it records `resume_point` and `hook`, parks itself, suspends.
//  * Exactly one wake per suspension. Whoever ends the wait (the event, or the
//    hook's on_cancel) calls wake(ctx) once. A wake on the home loop clears
//    `hook` at once, so a cancel delivered before the context runs finds no
//    hook and is left for the next suspension point to observe. A wake from
//    another thread cannot touch `hook`: there the event and the hook must
//    agree through their own atomic who wakes (see join_handle's `joiner`).
//  * request_cancel() may be called from any thread; delivery (calling the
//    hook's on_cancel) always happens on the home loop, never on the caller's
//    stack, which is what keeps cancellation free of lock-order problems.
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

class loop;  // lib/loop.hpp

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

  loop* home = nullptr;                    // written before started_bit (release)
  cancel_hook* hook = nullptr;             // home loop only
  std::coroutine_handle<> resume_point;    // home loop only (or before start)
  cancel_message cancel_msg;
  task_context* live_prev = nullptr;       // home loop's list of started, unfinished contexts
  task_context* live_next = nullptr;
  // The root coroutine finished (ran == true) or was dropped unrun because the
  // context was cancelled before it started (ran == false). Home loop. The
  // owner takes the result and destroys the root frame here.
  void (*finished)(task_context*, bool ran) noexcept = nullptr;
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
inline std::coroutine_handle<> transfer(std::coroutine_handle<> next) noexcept {
  if (driver* d = this_thread().active) {
    d->next = next;
    return std::noop_coroutine();
  }
  return next;
}

// Resume `h` and everything it transfers to, until the chain parks.
void drive(std::coroutine_handle<> h) noexcept;

// Throws weft::cancelled: the current loop's shared exception object when on
// a loop (no allocation that outlives the throw), a fresh one otherwise.
[[noreturn]] void throw_cancelled();
// The outcome of a task that ended cancelled without running: as above.
std::exception_ptr cancelled_outcome() noexcept;

// Cancellation requested for this context, or its loop is shutting down.
bool is_cancelled(const task_context* ctx) noexcept;

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
