// weft/detail/join_cell.hpp — what a spawned task and its join_handle
// share (join_cell), the running side of the task (spawned_context), and
// spawn_on, which makes the one and queues it.
//
// A spawned task is three pooled blocks (detail/block_pool.hpp): its root
// frame; a small join_cell, which waits in the loops' queues until a loop
// claims the task and then holds its outcome, shared by the strand and the
// join_handle and freed when both have let go; and its context
// (spawned_context), which the claiming loop builds from its own pool and
// frees as soon as the task quiesces. So a million queued tasks cost a
// million frames and cells, and a million finished, unjoined ones a million
// cells (48 bytes for an integer result).
//
// The `joiner` word is the rendezvous between the finishing task (on the
// loop that runs its end) and whoever joins it (any loop, or a plain thread in block_on):
//   0          nobody is waiting, not finished
//   ready      finished: the outcome may be read
//   detached   the handle was destroyed before the task finished
//   otherwise  a join_waiter* registered by one awaiting party
// Each side moves it with one atomic exchange or CAS, so a finish and a join
// (or a finish and a cancelled join) never both or neither act.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <utility>

#include <weft/detail/block_pool.hpp>
#include <weft/detail/context.hpp>
#include <weft/detail/rooted_context.hpp>
#include <weft/errors.hpp>
#include <weft/outcome.hpp>
#include <weft/task.hpp>

namespace weft {

template <class T>
class join_handle;  // join_handle.hpp

namespace detail {

class runtime_impl;

struct join_waiter {
  void (*notify)(join_waiter*) noexcept = nullptr;
};

// `rt`, or the calling loop's runtime when rt is null; std::logic_error off a
// loop thread without a runtime.
runtime_impl* resolve_runtime(runtime_impl* rt);
error_sink* error_sink_of(runtime_impl* rt) noexcept;
// Queue a spawned task's node on rt (its run claims it on the loop that pops
// it); rejected_execution once rt is shutting down.
void spawn_node(runtime_impl* rt, sched_node* n);
// Counts, on the current loop, the end of a spawned task that never got a
// context (join_cell::claim out of memory).
void count_unclaimed_end() noexcept;

template <class T>
struct spawned_context;

// What a join_handle points at: the outcome of a spawned task and the
// rendezvous of its finish with its join. Until a loop claims the task it is
// also what waits in the loop's queue (`link`, with the root frame in
// `root`); the claiming loop then builds the task's context (spawned_context)
// from its own pool, so a queued task costs its frame and this cell, and a
// context never crosses cores. The context is freed once the strand
// quiesces; the cell lives on for as long as the handle holds it.
template <class T>
struct join_cell final : pooled {
  static constexpr std::uintptr_t ready = 1;
  static constexpr std::uintptr_t detached = 2;
  // `life`: who keeps what alive, and the claim.
  //   handle_ref    the join_handle exists (keeps the cell)
  //   strand_ref    the task has not quiesced (keeps the cell)
  //   claimed       a loop built the context: `ctx` is valid while strand_ref is set
  //   cancel_early  cancel() came before the claim; the claim drops the task unrun
  //   k * pin       k cancel() calls are reading `ctx`; pins are taken only
  //                 while claimed and strand_ref are set, and the last of them
  //                 to let go after the strand left frees the context
  static constexpr std::uint32_t handle_ref = 1;
  static constexpr std::uint32_t strand_ref = 2;
  static constexpr std::uint32_t claimed = 4;
  static constexpr std::uint32_t cancel_early = 8;
  static constexpr std::uint32_t pin = 16;
  // The owners and pins in a value of `life`, without the claim's flags.
  static constexpr std::uint32_t holders(std::uint32_t v) noexcept { return v & ~(claimed | cancel_early); }

  // First, so a queued sched_node* is the cell's address (standard layout).
  // Before the claim: the queue link; from the claim on: the outcome.
  union storage {
    sched_node link;
    outcome<T> result;
    storage() noexcept : link() {}
    ~storage() {}
  } u;
  std::atomic<std::uintptr_t> joiner{0};
  std::atomic<std::uint32_t> life{handle_ref | strand_ref};
  bool owns_sink_ref = false;
  bool joined = false;  // the outcome was taken by a join (joining side only)
  union {
    void* root;                  // before the claim: the root frame's address
    spawned_context<T>* ctx;     // from the claim on
  };
  // Whose on_error hears of an unobserved exception. Borrowed from the
  // runtime (alive until this task finishes); a reference is taken only when
  // the task fails while its handle still exists.
  error_sink* sink = nullptr;

  join_cell(std::coroutine_handle<> r, error_sink* s) noexcept : root(r.address()), sink(s) {
    u.link.run = &claim;
  }
  // The outcome exists from the claim on (discard() makes one for a task
  // that never got that far).
  ~join_cell() { u.result.~outcome<T>(); }
  join_cell(const join_cell&) = delete;
  join_cell& operator=(const join_cell&) = delete;

  outcome<T>& result() noexcept { return u.result; }

  // sched_node::run while queued: the claiming loop builds the context and
  // hands it to claim_context, which runs it, or drops it unrun if it was
  // cancelled first or the runtime is stopping.
  static void claim(sched_node* n) noexcept;

  // The task finished; its outcome is in result() (the loop that ran its end).
  void outcome_ready() noexcept {
    // acq_rel: publishes the outcome to the joiner (release) and, when the
    // handle is already gone, sees everything it did before letting go (acquire).
    // Read before publishing: once `ready` is out, a joiner may move the
    // outcome out of the cell (only when the handle is gone is it ours still).
    const bool failed = outcome_access::is_error(result());  // stopped is not an error
    std::uintptr_t prev = joiner.exchange(ready, std::memory_order_acq_rel);
    if (failed) {
      if (prev == detached) {
        sink->report(result().error());
      } else {
        sink->add_ref();  // the handle may outlive the runtime
        owns_sink_ref = true;
      }
    }
    if (prev != 0 && prev != detached) {
      auto* w = reinterpret_cast<join_waiter*>(prev);
      w->notify(w);
    }
  }

  // The task quiesced (the same loop): its context (if any) is freed here unless
  // a cancel() is still reading it. Nothing of the cell may be read after the
  // fetch_sub unless it says we are the last owner: the handle may free it.
  void strand_gone(spawned_context<T>* self) noexcept {
    // acq_rel: whoever frees the context or the cell sees the other's use.
    std::uint32_t prev = life.fetch_sub(strand_ref, std::memory_order_acq_rel);
    if (prev / pin == 0) delete self;
    if (!(prev & handle_ref)) destroy();  // with pins, the handle is still there
  }

  void cancel() noexcept {
    // acquire: a pin taken while claimed and strand_ref are set keeps `ctx`
    // valid for us (the claim published it with release).
    std::uint32_t cur = life.load(std::memory_order_acquire);
    for (;;) {
      if (!(cur & strand_ref)) return;  // finished and quiesced: nothing to stop
      if (!(cur & claimed)) {
        if (cur & cancel_early) return;
        // acq_rel: the claim that sees cancel_early must also see our caller's writes.
        if (life.compare_exchange_weak(cur, cur | cancel_early, std::memory_order_acq_rel, std::memory_order_acquire))
          return;
        continue;
      }
      if (life.compare_exchange_weak(cur, cur + pin, std::memory_order_acquire, std::memory_order_acquire)) break;
    }
    request_cancel(ctx);
    // acq_rel: the last reader frees the context after every reader's use.
    std::uint32_t prev = life.fetch_sub(pin, std::memory_order_acq_rel);
    if (!(prev & strand_ref) && prev / pin == 1) delete ctx;  // the strand left while we read
  }

  // Register w to be notified when the outcome is ready; false if it already is.
  bool wait(join_waiter* w) {
    std::uintptr_t expected = 0;
    // acq_rel on success publishes w; acquire on failure sees the outcome.
    if (joiner.compare_exchange_strong(expected, reinterpret_cast<std::uintptr_t>(w),
                                       std::memory_order_acq_rel, std::memory_order_acquire))
      return true;
    if (expected == ready) return false;
    throw std::logic_error("weft: a join_handle is being awaited twice at once; await it from one place");
  }
  // Undo wait(); false if the finishing task already claimed w (it will notify).
  bool unwait(join_waiter* w) noexcept {
    auto expected = reinterpret_cast<std::uintptr_t>(w);
    return joiner.compare_exchange_strong(expected, 0, std::memory_order_acq_rel,
                                          std::memory_order_acquire);
  }
  bool is_ready() const noexcept { return joiner.load(std::memory_order_acquire) == ready; }

  // The result, or the task's ending rethrown (cancelled when it stopped).
  T take() {
    mark_joined();
    return outcome_access::take(result());
  }
  // The outcome itself, moved out (join_handle::outcome()).
  outcome<T> take_outcome() {
    mark_joined();
    return std::move(result());
  }
  void mark_joined() {
    if (joined) throw std::logic_error("weft: join_handle already joined; its result was taken");
    joined = true;
  }

  // The handle lets go; the task keeps running.
  void detach() noexcept {
    if (joined) {
      // The join took the outcome, so the task finished and nothing is left
      // to report; and once the strand is gone (it cannot come back, and no
      // pin outlives it) this handle is the only owner: no RMW needed.
      // acquire: pairs with strand_gone's release, before we free the cell.
      if (holders(life.load(std::memory_order_acquire)) == handle_ref ||
          holders(life.fetch_sub(handle_ref, std::memory_order_acq_rel)) == handle_ref)
        destroy();
      return;
    }
    // acq_rel: if the task already finished, we must see its outcome (acquire).
    std::uintptr_t prev = joiner.exchange(detached, std::memory_order_acq_rel);
    if (prev == ready && !joined && outcome_access::is_error(result())) sink->report(result().error());
    // acq_rel: as in strand_gone.
    if (holders(life.fetch_sub(handle_ref, std::memory_order_acq_rel)) == handle_ref) destroy();
  }

  // Undo the spawn of a cell never queued (the runtime refused it): the
  // frame dies unrun.
  void discard() noexcept {
    std::coroutine_handle<>::from_address(root).destroy();
    ::new (static_cast<void*>(&u.result)) outcome<T>();
    delete this;
  }

 private:
  void destroy() noexcept {
    if (owns_sink_ref) sink->drop_ref();
    delete this;
  }
};

// The running side of a spawned task: its context and root frame, built by
// the loop that claims it and freed as soon as it quiesces (the outcome went
// to the cell).
template <class T>
struct spawned_context final : root_holder<T>, pooled {
  join_cell<T>* cell;

  spawned_context(std::coroutine_handle<task_promise<T>> root, join_cell<T>* c) noexcept
      : root_holder<T>(root), cell(c) {
    this->out = &c->result();
    this->on_outcome = [](root_holder<T>* x) noexcept { static_cast<spawned_context*>(x)->cell->outcome_ready(); };
    this->quiesced = [](task_context* x) noexcept {
      auto* self = static_cast<spawned_context*>(x);
      self->cell->strand_gone(self);
    };
  }
};

template <class T>
void join_cell<T>::claim(sched_node* n) noexcept {
  // The link is the cell's first member, so n is the cell's address.
  auto* cell = reinterpret_cast<join_cell*>(n);
  auto root = std::coroutine_handle<task_promise<T>>::from_address(cell->root);
  ::new (static_cast<void*>(&cell->u.result)) outcome<T>();  // the link is done with
  // Ends the task unrun, without a context: the outcome is already set.
  auto end_unrun = [cell, root]() noexcept {
    root.destroy();
    cell->outcome_ready();
    count_unclaimed_end();
    cell->strand_gone(nullptr);
  };
  // acquire: sees an early cancel() (which releases it). One that comes after
  // this look is seen by the fetch_or below, as before.
  if (cell->life.load(std::memory_order_acquire) & cancel_early) {
    outcome_access::set_stopped(cell->result());  // cancelled before it ran: stopped, no context built
    end_unrun();
    return;
  }
  spawned_context<T>* x;
  try {
    x = new spawned_context<T>(root, cell);
  } catch (...) {
    // No memory for the context: the task ends unrun with that error.
    outcome_access::set_error(cell->result(), std::current_exception());
    end_unrun();
    return;
  }
  cell->ctx = x;
  // acq_rel: publishes ctx to cancellers (release); sees an early cancel (acquire).
  if (cell->life.fetch_or(claimed, std::memory_order_acq_rel) & cancel_early)
    x->flags.fetch_or(task_context::cancel_bit, std::memory_order_relaxed);  // nobody else sees x yet
  claim_context(x);
}

// A cell for t, not queued yet. The caller queues &cell->u.link or, if that
// fails, calls discard().
template <class T>
join_cell<T>* make_spawn(task<T>&& t, error_sink* sink) {
  return new join_cell<T>(t.release(), sink);  // t keeps its frame if the allocation throws
}

template <class T>
join_handle<T> spawn_on(runtime_impl* rt, task<T>&& t) {
  if (!t) throw std::invalid_argument("weft: spawn of an empty task (moved from or already awaited)");
  rt = resolve_runtime(rt);
  join_cell<T>* s = make_spawn(std::move(t), error_sink_of(rt));
  try {
    spawn_node(rt, &s->u.link);
  } catch (...) {
    s->discard();  // never queued: the frame dies with it, unrun
    throw;
  }
  return join_handle<T>(s);
}

}  // namespace detail
}  // namespace weft
