// lib/context.cpp — the task_context protocol of detail/context.hpp: starting,
// running, waking, cancelling, stopping and finishing contexts on their home
// loops.
//
// The flags word settles every race between threads in one atomic:
//  * claim (home loop) sets started_bit; a cancel that found it unset leaves
//    the claim to notice cancel_bit and drop the task unrun (stopped).
//  * a cancel of a started context sets cancel_bit and delivery_bit in one
//    CAS and queues the delivery; finishing sets done_bit. Whichever of the
//    delivery and the finish happens second (both on the home loop) reports
//    the context quiesced, so its owner never frees it under a delivery.
//
// Stopping (stop_strand) is iterative: each frame from `top` outwards is
// destroyed on its own, after the task object in its parent that owns it is
// cleared, so a chain of a million nested awaits stops in constant stack and
// every frame is destroyed exactly once, innermost first.
#include <cstdio>
#include <typeinfo>

#include <weft/cancel.hpp>
#include <weft/runtime.hpp>
#include <weft/detail/context.hpp>
#include <weft/task.hpp>

#include "loop.hpp"
#include "runtime_impl.hpp"

namespace weft::detail {

thread_state& this_thread() noexcept {
  // The one thread-local weft keeps: which loop (if any) this thread runs.
  static thread_local thread_state state;
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

void finish_context(task_context* ctx, bool linked, bool stopped) noexcept {
  loop* home = ctx->home;
  if (linked) home->unlink_live(ctx);
  ctx->hook = nullptr;
  home->count_completion();
  ctx->finished(ctx, stopped);
  // acq_rel: a canceller that sees done_bit must also see the outcome.
  std::uint32_t old = ctx->flags.fetch_or(task_context::done_bit, std::memory_order_acq_rel);
  if (!(old & task_context::delivery_bit)) ctx->quiesced(ctx);
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
  finish_context(ctx, true, true);
}

void run_context(sched_node* n) noexcept {
  auto* ctx = static_cast<task_context*>(n);
  ctx->hook = nullptr;  // whatever parked it is done with it
  thread_state& ts = this_thread();
  task_context* outer = ts.current;
  ts.current = ctx;
  // The one place cancellation takes effect (see context.hpp): a parked
  // strand that is cancelled by now is stopped rather than resumed.
  if (is_cancelled(ctx)) stop_strand(ctx);  // frees ctx's frames; may free ctx
  else drive(ctx->resume_point);            // may finish and free ctx
  ts.current = outer;
}

void deliver_cancel(sched_node* n) noexcept {
  task_context* ctx = static_cast<cancel_message*>(n)->target;
  std::uint32_t old = ctx->flags.fetch_and(~task_context::delivery_bit, std::memory_order_acq_rel);
  if (old & task_context::done_bit) {
    ctx->quiesced(ctx);  // it finished while this delivery was queued
    return;
  }
  if (ctx->shield != 0) return;  // inside shielded(): the first point after it stops
  if (cancel_hook* h = ctx->hook) {
    ctx->hook = nullptr;
    h->on_cancel(h);
  }
  // No hook: the task is queued to run (its resumption stops it) or running
  // (its next suspension point does).
}

}  // namespace

void claim_context(sched_node* n) noexcept {
  auto* ctx = static_cast<task_context*>(n);
  loop* l = this_thread().current_loop;
  ctx->home = l;
  ctx->run = &run_context;
  // acq_rel: publishes `home` to cancellers (release); sees a cancel that came first (acquire).
  std::uint32_t old = ctx->flags.fetch_or(task_context::started_bit, std::memory_order_acq_rel);
  if ((old & task_context::cancel_bit) || l->stopping()) {
    finish_context(ctx, false, true);  // dropped unrun: stopped
    return;
  }
  l->link_live(ctx);
  run_context(ctx);
}

void finish_root(task_context* ctx) noexcept { finish_context(ctx, true, false); }

bool is_cancelled(const task_context* ctx) noexcept {
  if (ctx->shield != 0) return false;
  if (ctx->flags.load(std::memory_order_acquire) & task_context::cancel_bit) return true;
  return ctx->home != nullptr && ctx->home->stopping();
}

bool stop_if_cancelled(task_context* ctx, std::coroutine_handle<> h) noexcept {
  if (!is_cancelled(ctx)) return false;
  ctx->resume_point = h;
  ctx->home->push_local(ctx);  // run_context sees the cancel and stops it
  return true;
}

void wake(task_context* ctx) noexcept {
  loop* home = ctx->home;
  if (home == this_thread().current_loop) {
    // The wait is over: a cancel delivered before the context runs must not
    // find the hook and wake it a second time. (A waker on another thread
    // cannot clear it; there the hook itself knows it lost, see context.hpp.)
    ctx->hook = nullptr;
    home->push_local(ctx);
  } else {
    home->post(ctx);
  }
}

void defer(task_context* ctx) noexcept { ctx->home->push_deferred(ctx); }

void request_cancel(task_context* ctx) noexcept {
  std::uint32_t old = ctx->flags.load(std::memory_order_relaxed);
  std::uint32_t want;
  do {
    if (old & (task_context::cancel_bit | task_context::done_bit)) return;
    want = old | task_context::cancel_bit;
    if (old & task_context::started_bit) want |= task_context::delivery_bit;
    // acq_rel: if started, we read `home` below (acquire of the claim's release).
  } while (!ctx->flags.compare_exchange_weak(old, want, std::memory_order_acq_rel, std::memory_order_relaxed));
  if (!(old & task_context::started_bit)) return;  // the claim will see cancel_bit
  ctx->cancel_msg.target = ctx;
  ctx->cancel_msg.run = &deliver_cancel;
  loop* home = ctx->home;
  if (home == this_thread().current_loop) home->push_local(&ctx->cancel_msg);
  else home->post(&ctx->cancel_msg);
}

void start_on_current_loop(task_context* ctx) {
  loop* l = this_thread().current_loop;
  if (l == nullptr) throw std::logic_error("weft: a child task can only be started from a loop thread");
  ctx->run = &claim_context;
  l->count_spawn();
  l->push_fresh(ctx);
}

void start_node_local(sched_node* n) {
  loop* l = this_thread().current_loop;
  if (l == nullptr) throw std::logic_error("weft: a child task can only be started from a loop thread");
  l->count_spawn();
  l->push_local(n);
}

void start_local(task_context* ctx) {
  ctx->run = &claim_context;
  start_node_local(ctx);
}

runtime_impl* resolve_runtime(runtime_impl* rt) {
  if (rt != nullptr) return rt;
  loop* l = this_thread().current_loop;
  if (l == nullptr)
    throw std::logic_error("weft: spawn() called off a loop thread; use runtime::spawn or runtime::block_on");
  return &l->rt;
}

void spawn_node(runtime_impl* rt, sched_node* n) { rt->spawn(n); }

void count_unclaimed_end() noexcept { this_thread().current_loop->count_completion(); }

error_sink* error_sink_of(runtime_impl* rt) noexcept { return rt->errors.p; }

error_sink* current_error_sink() noexcept {
  loop* l = this_thread().current_loop;
  return l ? l->rt.errors.p : nullptr;
}

void error_sink::report(std::exception_ptr e) noexcept {
  if (on_error) {
    try {
      on_error(e);
      return;
    } catch (...) {
      // An on_error that throws has nobody to report to; fall through to stderr.
    }
  }
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "weft: unobserved exception from a detached task: %s\n", ex.what());
  } catch (...) {
    std::fprintf(stderr, "weft: unobserved exception of unknown type from a detached task\n");
  }
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
