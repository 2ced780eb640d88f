// weft/detail/context.hpp — the seam between coroutine types and the event loops:
// the task-context protocol. Its parts have headers of their own (a queue
// node, sched_node.hpp; a strand's state, task_context.hpp; the thread's,
// thread_state.hpp; the error sink, error_sink.hpp), included here.
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
//    in (detail/task_promise.hpp keeps it as tasks await each other);
//    stopping walks from it to the root through promise_base::parent.
//  * `finished` and then `quiesced` are called once, on the loop that ran the
//    strand's end; the owner may free the context in `quiesced`. No queue or
//    canceller holds it by then: a queued context is not finished, and a
//    canceller touches it only inside request_cancel (owners keep the context
//    alive across that call; see join_handle's pins).
#pragma once

#include <weft/detail/error_sink.hpp>
#include <weft/detail/sched_node.hpp>
#include <weft/detail/task_context.hpp>
#include <weft/detail/thread_state.hpp>

namespace weft::detail {

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

}  // namespace weft::detail
