// lib/core/context.cpp — the task_context protocol of detail/context.hpp: running,
// waking, cancelling, stopping and finishing contexts on whichever loop runs
// them. It sits below the loop: what it needs of a loop (queue a context,
// the live list, counting an end) it asks through lib/core/context_host.hpp.
//
// The flags word settles every race between threads in one atomic (its
// states are listed next to it in context.hpp):
//  * wake() and request_cancel() move a parked context to queued with one CAS
//    and push it; a context that is queued or running only gets their bit,
//    so it is never in two queues and never runs on two loops.
//  * A run starts with a CAS from queued to running that also takes woken:
//    with it, the wait is over (resume, or stop if cancelled); without it,
//    the context was queued by a cancel while parked, and the run hands the
//    cancellation to its hook. The run ends with a CAS that drops running
//    and, if a wake came meanwhile, queues the context again on this loop.
//  * Every CAS is acq_rel: the release side hands the runner's fields (hook,
//    resume_point, top, the frames) to the next runner or waker, the acquire
//    side takes them.
//
// Stopping (stop_strand) is iterative: each frame from `top` outwards is
// destroyed on its own, after the task object in its parent that owns it is
// cleared, so a chain of a million nested awaits stops in constant stack and
// every frame is destroyed exactly once, innermost first.
#include <cstdio>
#include <typeinfo>

#include <weft/cancel.hpp>
#include <weft/errors.hpp>
#include <weft/detail/context.hpp>
#include <weft/task.hpp>

#include "core/context_host.hpp"

namespace weft::detail {

thread_state& this_thread() noexcept {
  // The one thread-local weft keeps: which loop (if any) this thread runs.
  // Out of line, never inlined (not even by LTO), and opaque to the
  // optimiser: a task migrates between loops across a co_await, and clang
  // before 16 keeps a thread-local's address computed before a suspension
  // point and reuses it after (LLVM issues 47177, 47179, 63022), which in a
  // coroutine body would read the previous thread's state.
  static thread_local thread_state state;
  asm volatile("" ::: "memory");
  return state;
}

void drive(std::coroutine_handle<> h) noexcept {
  thread_state& ts = this_thread();
  driver d;
  driver* outer = ts.active;
  ts.active = &d;
  while (h) {
    d.next = nullptr;
    h.resume();
    h = d.next;
  }
  ts.active = outer;
}

namespace {

using tc = task_context;

void finish_context(task_context* ctx, bool stopped) noexcept {
  thread_state& ts = this_thread();
  strand_ended(ctx);
  ctx->hook = nullptr;
  // acq_rel: a canceller that sees done_bit leaves the context alone; nothing
  // queues it from here on (it is running, and no wait is pending).
  ctx->flags.fetch_or(tc::done_bit, std::memory_order_acq_rel);
  ts.current_ended = true;
  ctx->finished(ctx, stopped);
  ctx->quiesced(ctx);  // may free ctx
}

// The strand is parked and cancelled: destroy its frames innermost first,
// then finish it as stopped (which destroys the root frame).
void stop_strand(task_context* ctx) noexcept {
  promise_base* p = ctx->top;
  // A frame with a weft parent is owned by a task object in that parent's
  // frame: clear that owner, so the parent's destruction does not destroy it
  // again, then destroy it. The loop ends at the root (no parent), or at a
  // frame awaited by a non-weft coroutine, which the root's destruction
  // reaches through that coroutine's own objects.
  while (p != nullptr && p->parent != nullptr) {
    promise_base* up = p->parent;
    std::exchange(*p->owner, {}).destroy();
    p = up;
  }
  ctx->top = p;
  finish_context(ctx, true);
}

// Takes a queued context: queued -> running, consuming woken. Returns the
// flags as they were.
std::uint32_t begin_run(task_context* ctx) noexcept {
  std::uint32_t old = ctx->flags.load(std::memory_order_relaxed);
  // acq_rel: acquire takes the previous runner's and the waker's writes.
  while (!ctx->flags.compare_exchange_weak(old, (old & ~(tc::queued_bit | tc::woken_bit)) | tc::running_bit,
                                           std::memory_order_acq_rel, std::memory_order_relaxed)) {
  }
  ctx->last = this_thread().current_loop;
  return old;
}

// The run is over and the strand did not end: park it, or queue it again if a
// wake came during the run. Returns false, and leaves it running, when a
// cancel came during the run after the strand's suspension point looked:
// the canceller saw it running and left the hook to us. Nothing of ctx may
// be touched after a CAS that parks it: a waker may queue it and another
// loop run it at once.
bool end_run(task_context* ctx) noexcept {
  // A task joins its loop's live list (which shutdown cancels) the first time
  // it parks: one that runs to its end in one go never costs the list's lock
  // (W1's children), and one that runs or is queued meets the stopping loop
  // at its next resumption or suspension point anyway.
  if (ctx->live_owner == nullptr && !(ctx->flags.load(std::memory_order_relaxed) & tc::woken_bit))
    join_live_list(ctx);
  const bool hooked = ctx->hook != nullptr && ctx->shield == 0;
  // acquire (load and failed CAS): a cancel seen here hands us the
  // canceller's writes before we call the hook.
  std::uint32_t old = ctx->flags.load(std::memory_order_acquire);
  std::uint32_t want;
  do {
    if (hooked && (old & tc::cancel_bit) && !(old & tc::woken_bit)) return false;
    want = old & ~tc::running_bit;
    if (old & tc::woken_bit) want |= tc::queued_bit;
    // acq_rel: release hands this run's writes to the next runner.
    // Read before the CAS: once parked, the context is not ours.
  } while (!ctx->flags.compare_exchange_weak(old, want, std::memory_order_acq_rel, std::memory_order_acquire));
  if (!(old & tc::woken_bit)) return true;
  requeue_here(ctx, std::exchange(ctx->yielded, false));
  return true;
}

// One run of a context this thread took (begin_run returned `flags`).
void run_strand(task_context* ctx, std::uint32_t flags) noexcept {
  thread_state& ts = this_thread();
  task_context* outer = ts.current;
  const bool outer_ended = ts.current_ended;
  ts.current = ctx;
  ts.current_ended = false;
  for (;;) {
    if (flags & tc::woken_bit) {
      ctx->hook = nullptr;  // whatever parked it is done with it
      // The one place cancellation takes effect (see context.hpp): a
      // strand that is cancelled by now is stopped rather than resumed.
      if (is_cancelled(ctx)) stop_strand(ctx);  // may free ctx
      else drive(ctx->resume_point);            // may finish and free ctx
    } else if (cancel_hook* h = ctx->hook; h != nullptr && ctx->shield == 0) {
      // Cancelled while parked (queued by request_cancel), or while this run
      // was parking it (end_run said so): release what it waits on. The hook
      // (or the event that beat it) wakes it exactly once.
      ctx->hook = nullptr;
      h->on_cancel(h);
    }
    if (ts.current_ended) break;
    // A cancelled strand woken during this run (its hook released at once,
    // or its own suspension point saw the cancel) stops now rather than
    // after another trip through a queue: W3's path.
    flags = ctx->flags.load(std::memory_order_relaxed);
    if (!(flags & tc::woken_bit) || ctx->yielded || !is_cancelled(ctx)) {
      if (end_run(ctx)) break;
      flags = 0;  // parking lost to a cancel: hand it to the hook, above
      continue;
    }
    // acq_rel: takes the waker's writes, as begin_run does.
    flags = ctx->flags.fetch_and(~tc::woken_bit, std::memory_order_acq_rel);
  }
  ts.current = outer;
  ts.current_ended = outer_ended;
}

void run_context(sched_node* n) noexcept {
  auto* ctx = static_cast<task_context*>(n);
  run_strand(ctx, begin_run(ctx));
}

}  // namespace

void claim_context(sched_node* n) noexcept {
  auto* ctx = static_cast<task_context*>(n);
  ctx->run = &run_context;
  const std::uint32_t old = begin_run(ctx);
  thread_state& ts = this_thread();
  if ((old & tc::cancel_bit) || ts.loop_stopping->load(std::memory_order_relaxed)) {
    const bool outer_ended = ts.current_ended;
    finish_context(ctx, true);  // dropped unrun: stopped
    ts.current_ended = outer_ended;
    return;
  }
  run_strand(ctx, old | tc::woken_bit);  // the first run resumes the root, in resume_point
}

void finish_root(task_context* ctx) noexcept { finish_context(ctx, false); }

bool is_cancelled(const task_context* ctx) noexcept {
  if (ctx->shield != 0) return false;
  if (ctx->flags.load(std::memory_order_acquire) & tc::cancel_bit) return true;
  // relaxed: only this loop's thread writes it (its stop message) and reads it here.
  const std::atomic<bool>* stopping = this_thread().loop_stopping;
  return stopping != nullptr && stopping->load(std::memory_order_relaxed);
}

bool stop_if_cancelled(task_context* ctx, std::coroutine_handle<> h) noexcept {
  if (!is_cancelled(ctx)) return false;
  ctx->resume_point = h;
  // We are running it: the run's end sees the bit and stops it (run_context).
  ctx->flags.fetch_or(tc::woken_bit, std::memory_order_relaxed);
  return true;
}

void wake(task_context* ctx) noexcept {
  std::uint32_t old = ctx->flags.load(std::memory_order_relaxed);
  std::uint32_t want;
  do {
    want = old | tc::woken_bit;
    if (!(old & (tc::queued_bit | tc::running_bit))) want |= tc::queued_bit;
    // acq_rel: release hands what ended the wait to the runner; acquire
    // takes `rt` from the run that parked it.
  } while (!ctx->flags.compare_exchange_weak(old, want, std::memory_order_acq_rel, std::memory_order_relaxed));
  if (!(old & (tc::queued_bit | tc::running_bit))) schedule(ctx);
  // Otherwise the context is not ours to touch: its runner re-queues it.
}

void defer(task_context* ctx) noexcept {
  ctx->yielded = true;
  ctx->flags.fetch_or(tc::woken_bit, std::memory_order_relaxed);  // we are running it: as in stop_if_cancelled
}

void request_cancel(task_context* ctx) noexcept {
  std::uint32_t old = ctx->flags.load(std::memory_order_relaxed);
  std::uint32_t want;
  do {
    if (old & (tc::cancel_bit | tc::done_bit)) return;
    want = old | tc::cancel_bit;
    // Parked: queue it, so that a loop hands it the cancellation.
    if (!(old & (tc::queued_bit | tc::running_bit))) want |= tc::queued_bit;
    // acq_rel: the runner that sees cancel_bit sees our caller's writes; we
    // take `rt` from the run that parked it.
  } while (!ctx->flags.compare_exchange_weak(old, want, std::memory_order_acq_rel, std::memory_order_relaxed));
  if (!(old & (tc::queued_bit | tc::running_bit))) schedule(ctx);
}

bool is_cancellation(const std::exception_ptr& e) noexcept {
  if (!e) return false;
  try {
    std::rethrow_exception(e);
  } catch (const cancelled&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace weft::detail

namespace weft::this_task {
bool is_cancelled() noexcept {
  detail::task_context* ctx = detail::current_context();
  return ctx != nullptr && detail::is_cancelled(ctx);
}
}  // namespace weft::this_task
