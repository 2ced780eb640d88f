// lib/core/loop.cpp — the turn of an event loop; see loop.hpp for who owns what.
//
// One turn: take the inbox (messages) and a batch of the inject queue (every
// turn, so neither starves behind tasks that keep waking each other); run up
// to `budget` runnable nodes, one at a time from the stealable run queue
// (refilling from the inject queue, then stealing, when it runs out); reap
// io_uring completions; fire due timers; look at the peers (a late peer's
// timers are fired here, a stuck peer's run queue stolen); and, only when
// nothing at all is runnable, sleep in the kernel with one io_uring timeout
// armed for the earliest expiry of its own wheel or of a peer's plus the
// grace after which it would fire them.
#include "core/loop.hpp"

#include "core/cpu_relax.hpp"

#include <weft/detail/block_pool.hpp>
#include <weft/errors.hpp>

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <ctime>
#include <system_error>

#include "core/context_host.hpp"
#include "core/runtime_impl.hpp"

namespace weft::detail {

namespace {
// How many runnable nodes run before the loop looks at its inbox, completions
// and timers again: large enough to amortise the checks, small enough that a
// message from another thread or a due timer waits for at most a few
// microseconds.
constexpr unsigned run_budget = 128;
// How many nodes a loop moves from the inject queue into its own run queue
// at once (they stay stealable there).
constexpr std::size_t inject_batch = 32;
// How many of its own spawns a loop stages before it makes them stealable:
// one lock per batch instead of one per spawn. Staged tasks are published
// anyway as soon as the node that spawned them returns (parks, ends).
constexpr std::size_t stage_batch = 32;
// A loop with nothing to do while a peer is awake sleeps at most this long:
// the peer may turn busy with work queued behind it that nobody announced
// (one woken task is the waker's to run, see push), and this loop then
// takes it on its next turn.
constexpr std::int64_t watch_ns = 1'000'000;
// Most tasks one steal takes: half the victim's queue, up to this many.
constexpr std::size_t steal_max = 128;
// A peer that has not started a turn for this long is running something that
// does not suspend: its run queue is stolen from even by a busy loop. A
// healthy turn (128 nodes) takes tens of microseconds.
constexpr std::int64_t stuck_ns = 200'000;
// A peer late by this much for its earliest timer is busy: its due timers
// are fired by whoever notices. Small against the wheel's default 1 ms
// tick, so a sleeper on a busy loop is late by well under a millisecond.
constexpr std::int64_t fire_grace_ns = 200'000;
// How often a busy loop looks at its peers for the two above.
constexpr std::int64_t help_interval_ns = 50'000;
// How long a loop that just ran out of work polls its own inbox, run queue,
// the inject queue and its ring before it sleeps in the kernel. Waking a
// sleeping loop costs an eventfd write and, on a virtual machine whose idle
// vCPU halted, tens of microseconds; work that comes back within this window
// (an offload's result, a wake from the other loop) is picked up without
// either. It does not poll the peers' queues: reading a busy peer's queue on
// every spin would bounce that peer's cache line on every push (measured: W1
// fell by a third); the sleep handshake looks at them once. An idle loop
// spins once, then sleeps, so idle CPU stays near zero.
constexpr std::int64_t idle_spin_ns = 30'000;

std::int64_t now_ns() noexcept {
  return std::chrono::steady_clock::now().time_since_epoch().count();
}
}  // namespace

loop::loop(runtime_impl& r, unsigned i, unsigned ring_entries, std::chrono::nanoseconds tick,
           ring_faults* faults)
    : rt(r), index(i), ring_(ring_entries, faults), wheel_(tick, now_ns()), min_wake_gap_(tick.count() / 4) {
  eventfd_ = ::eventfd(0, EFD_CLOEXEC);
  if (eventfd_ < 0) throw std::system_error(errno, std::system_category(), "weft: cannot create the loop's eventfd");
  live_head_.live_next = live_head_.live_prev = &live_head_;
  eventfd_done_.owner = this;
  eventfd_done_.complete = [](completion* c, int) noexcept {
    static_cast<eventfd_done*>(c)->owner->eventfd_armed_ = false;
  };
  timeout_done_.owner = this;
  timeout_done_.complete = [](completion* c, int) noexcept {
    // Fired, removed or replaced: in every case no timeout of ours is pending
    // under this completion any more (an update completes the old one).
    static_cast<timeout_done*>(c)->owner->armed_deadline_.reset();
  };
  stop_msg_.run = [](sched_node*) noexcept {
    loop* self = this_thread().current_loop;
    self->stopping_.store(true, std::memory_order_relaxed);
    std::lock_guard<spin_lock> g(self->live_mu_);
    for (task_context* c = self->live_head_.live_next; c != &self->live_head_; c = c->live_next)
      request_cancel(c);
  };
  quit_msg_.run = [](sched_node*) noexcept { this_thread().current_loop->quit_ = true; };
}

loop::~loop() {
  if (eventfd_ >= 0) ::close(eventfd_);
}

void loop::post(sched_node* n) noexcept {
  loop* cur = this_thread().current_loop;
  if (cur != nullptr && &cur->rt == &rt) {
    inbox_.push(n);
    kick_soon(cur);
    return;
  }
  outside_wake([&] {
    inbox_.push(n);
    kick();
  });
}

template <class F>
void loop::outside_wake(F publish_and_kick) noexcept {
  rt.outside_wakers.fetch_add(1);  // seq_cst: before the node can be seen
  publish_and_kick();
  // release: everything this waker did to the loop happens before the
  // destructor's acquire load sees the count fall.
  rt.outside_wakers.fetch_sub(1, std::memory_order_release);
}

void loop::kick_soon(loop* cur) noexcept {
  if (cur != this && index < 64) {
    cur->kick_mask_ |= std::uint64_t{1} << index;
    return;
  }
  kick();
}

void loop::flush_kicks() noexcept {
  while (kick_mask_ != 0) {
    const unsigned i = static_cast<unsigned>(std::countr_zero(kick_mask_));
    kick_mask_ &= kick_mask_ - 1;
    rt.loops[i]->kick();
  }
}

void loop::push(sched_node* n) noexcept {
  if (fired_ != nullptr) {
    fired_->push(n);  // woken by a timer this loop is firing: see fire_due
    return;
  }
  runq.push(n);  // seq_cst size: the pusher's half of the sleep handshake
  // One runnable task is this loop's to run next; a sleeping peer is woken
  // only for a surplus (a syscall per hand-off made W5 ten times slower).
  // If this loop then turns busy, a peer that sleeps wakes within watch_ns
  // anyway (sleep()) and takes the task.
  if (runq.size() > 1) rt.wake_idle_peer(this);
}

void loop::push_spawn(sched_node* n) noexcept {
  staged_.push(n);
  if (staged_.size() >= stage_batch) publish_staged();
}

void loop::publish_staged() noexcept {
  runq.push_all(staged_);  // seq_cst size: as in push
  rt.wake_idle_peer(this);
}

void loop::fire_due(loop& wheel_owner, std::int64_t now) noexcept {
  // What the timers wake goes to the front of this loop's run queue, in
  // firing order: a sleeper's wait is over and it should not queue behind
  // every task that merely yielded (W7's sleepers, behind a thousand
  // pingers, were late by a whole pass otherwise). Order among them is the
  // wheel's, so equal deadlines still run in arming order.
  run_queue woken;
  fired_ = &woken;
  wheel_owner.advance_locked(now);
  fired_ = nullptr;
  if (!woken.empty()) {
    runq.push_front_all(woken);
    rt.wake_idle_peer(this);
  }
}

void loop::push_yielded(sched_node* n) noexcept {
  yielded.push(n);  // seq_cst size: as in push
  if (yielded.size() + runq.size() > 1) rt.wake_idle_peer(this);  // a surplus: as in push
}

void loop::push_remote(sched_node* n) noexcept {
  outside_wake([&] {
    runq.push(n);
    // Awake but stuck in a task that does not suspend: a sleeping peer
    // would otherwise not hear of the work until something else woke it.
    if (!kick() && now_ns() - turn_ns_.load(std::memory_order_relaxed) > stuck_ns) rt.wake_idle_peer(this);
  });
}

bool loop::kick() noexcept {
  // seq_cst load: the pusher's half of the sleep handshake (see loop.hpp).
  if (sleeping.load() && sleeping.exchange(false)) {
    std::uint64_t one = 1;
    // The read armed on the ring completes and the kernel wakes the loop.
    // A failed write (only EAGAIN at counter overflow) still leaves it readable.
    [[maybe_unused]] auto n = ::write(eventfd_, &one, sizeof one);
    return true;
  }
  return false;
}

void loop::begin_stop() noexcept { post(&stop_msg_); }
void loop::quit() noexcept { post(&quit_msg_); }

void loop::link_live(task_context* c) noexcept {
  c->live_owner = this;
  std::lock_guard<spin_lock> g(live_mu_);
  c->live_next = &live_head_;
  c->live_prev = live_head_.live_prev;
  live_head_.live_prev->live_next = c;
  live_head_.live_prev = c;
}

void loop::unlink_live(task_context* c) noexcept {
  std::lock_guard<spin_lock> g(live_mu_);
  c->live_prev->live_next = c->live_next;
  c->live_next->live_prev = c->live_prev;
  c->live_next = c->live_prev = nullptr;
}

// ---- timers ------------------------------------------------------------------

void loop::publish_expiry() noexcept {
  const auto next = wheel_.next_expiry();
  const auto hint = wheel_.next_deadline_hint();
  next_expiry_.store(next ? *next : INT64_MAX, std::memory_order_relaxed);
  next_hint_.store(hint ? *hint : INT64_MAX, std::memory_order_relaxed);
  armed_timers.store(wheel_.size(), std::memory_order_relaxed);
}

void loop::arm_timer(timer_node* n, std::int64_t deadline_ns) noexcept {
  n->owner = this;
  std::lock_guard<spin_lock> g(wheel_mu_);
  wheel_.insert(n, deadline_ns);
  publish_expiry();
}

bool loop::disarm_timer(timer_node* n) noexcept {
  std::lock_guard<spin_lock> g(wheel_mu_);
  if (!n->armed()) return false;  // fired (its callback ran under this lock) or never armed
  wheel_.remove(n);
  publish_expiry();
  return true;
}

void loop::advance_locked(std::int64_t now) noexcept {
  // The callbacks run here, under the lock, on the calling loop's thread:
  // their wakes queue the woken tasks there, and a disarm racing a fire
  // waits for the callback to finish, so it never frees a node under it.
  wheel_.advance(now, [](timer_node* t) noexcept { t->fire(t); });
  publish_expiry();
}

void loop::expire_timers(std::int64_t now) noexcept {
  // At the wheel's next expiry (a tick boundary, where it fires or cascades
  // a slot), and also once the earliest deadline it knows of has passed,
  // inside its tick: a busy loop fires on time rather than up to a tick
  // late. The walk of the tick's slot refreshes that hint, so the next
  // advance comes when the next deadline is due, not every turn (measured
  // on W2: p50 lateness 40-65 us this way, 120-250 us when held to one
  // advance per quarter tick).
  if (next_hint_.load(std::memory_order_relaxed) > now && next_expiry_.load(std::memory_order_relaxed) > now) return;
  std::lock_guard<spin_lock> g(wheel_mu_);
  fire_due(*this, now);
}

void loop::help(loop& thief, std::int64_t now) noexcept {
  const std::int64_t due = next_hint_.load(std::memory_order_relaxed);
  if (due != INT64_MAX && now - due > fire_grace_ns && wheel_mu_.try_lock()) {
    thief.fire_due(*this, now);
    wheel_mu_.unlock();
  }
  if (now - turn_ns_.load(std::memory_order_relaxed) > stuck_ns) {
    for (steal_queue* q : {&yielded, &runq}) {
      const std::size_t avail = q->size();
      if (avail == 0) continue;
      run_queue got;
      if (q->take(got, std::min(steal_max, (avail + 1) / 2)) > 0) {
        // To the front: they are the victim's oldest (or timer-woken) tasks,
        // and have waited longer than anything in the thief's own queue.
        // At the back, W2's woken sleepers waited behind tens of thousands
        // of first runs (p99 lateness 5 ms, max 15 ms).
        thief.runq.push_front_all(got);
      }
    }
  }
}

// ---- the turn ----------------------------------------------------------------

void loop::drain_inbox() noexcept {
  sched_node* last = nullptr;
  std::size_t count = 0;
  if (sched_node* first = inbox_.take_all(&last, &count)) local_.push_chain(first, last, count);
}

bool loop::take_injected() noexcept {
  run_queue got;
  if (rt.inject_queue.take(got, inject_batch) == 0) return false;
  runq.push_all(got);
  return true;
}

bool loop::find_work() noexcept {
  drain_inbox();
  if (runnable() || take_injected()) return true;
  run_queue got;
  if (rt.steal_into(*this, got, steal_max) == 0) return false;
  runq.push_all(got);
  return true;
}

void loop::run_ready(unsigned budget) noexcept {
  while (budget-- > 0) {
    sched_node* n = local_.pop();
    if (n == nullptr) n = runq.pop();
    // Out of work: the turn ends (timers, completions, yielded tasks) before
    // the loop looks at its peers, which costs a cache miss per line read.
    if (n == nullptr) return;
    n->run(n);
    if (!staged_.empty()) publish_staged();
  }
}

void loop::arm_eventfd() noexcept {
  if (eventfd_armed_) return;
  io_uring_sqe* s = ring_.sqe(&eventfd_done_);
  io_uring_prep_read(s, eventfd_, &eventfd_value_, sizeof eventfd_value_, 0);
  eventfd_armed_ = true;
}

void loop::arm_timeout(std::int64_t deadline_ns) noexcept {
  timeout_ts_.tv_sec = deadline_ns / 1'000'000'000;
  timeout_ts_.tv_nsec = deadline_ns % 1'000'000'000;
  if (armed_deadline_) {
    // Move the pending timeout earlier rather than add a second one.
    io_uring_sqe* s = ring_.sqe(nullptr);
    io_uring_prep_timeout_update(s, &timeout_ts_, reinterpret_cast<std::uint64_t>(&timeout_done_),
                                 IORING_TIMEOUT_ABS);
  } else {
    io_uring_sqe* s = ring_.sqe(&timeout_done_);
    io_uring_prep_timeout(s, &timeout_ts_, 0, IORING_TIMEOUT_ABS);
  }
  armed_deadline_ = deadline_ns;
}

bool loop::has_visible_work() const noexcept {
  return runnable() || !inbox_.empty() || rt.any_work();
}

bool loop::spin_for_work() noexcept {
  std::int64_t until = now_ns() + idle_spin_ns;
  const std::int64_t due = next_hint_.load(std::memory_order_relaxed);
  until = std::min(until, due);  // a due timer ends the spin
  do {
    for (int i = 0; i < 32; ++i) {
      if (!inbox_.empty() || runnable() || rt.inject_queue.size() > 0 || ring_.has_completions() || quit_)
        return true;
      cpu_relax();
    }
  } while (now_ns() < until);
  return false;
}

void loop::sleep() noexcept {
  flush_kicks();  // never sleep on a deferred kick
  pool_flush();   // nor on blocks other loops may be waiting to reuse
  // An idle loop gives back what its last burst left free, now or, if the
  // pacing says later, when it wakes for that (below).
  const std::int64_t sweep_at = pool_scavenge(now_ns());
  // seq_cst: the loop's half of the sleep handshake (see loop.hpp).
  sleeping.store(true);
  rt.sleepers.fetch_add(1);
  if (has_visible_work() || quit_) {
    sleeping.store(false);
    rt.sleepers.fetch_sub(1);
    return;
  }
  const std::int64_t now = now_ns();
  std::optional<std::int64_t> at;
  {
    std::lock_guard<spin_lock> g(wheel_mu_);
    if (auto next = wheel_.next_expiry()) {
      // Wake near the earliest deadline inside its tick rather than at the
      // tick's end (lateness well under a tick), but at most min_wake_gap_
      // apart, so a crowded tick costs a few wakes, not one per deadline.
      const std::int64_t hint = *wheel_.next_deadline_hint();
      at = std::min(*next, std::max(hint, now + min_wake_gap_));
    }
  }
  // A peer that turns busy before its timers are due would hold them: wake
  // in time to fire them for it (help), a grace after they fall due. A peer
  // that is not busy fires them itself first, and this loop sleeps again.
  // And a peer that is awake may turn busy with work nobody announced
  // (watch_ns).
  for (auto& p : rt.loops) {
    if (p.get() == this) continue;
    std::int64_t peer_at = INT64_MAX;
    if (const std::int64_t due = p->next_hint_.load(std::memory_order_relaxed); due != INT64_MAX)
      peer_at = std::max(due + fire_grace_ns + 1, now + min_wake_gap_);
    if (!p->sleeping.load(std::memory_order_relaxed)) peer_at = std::min(peer_at, now + watch_ns);
    if (peer_at != INT64_MAX && (!at || peer_at < *at)) at = peer_at;
  }
  if (sweep_at != INT64_MAX && (!at || sweep_at < *at)) at = sweep_at;
  // IORING_TIMEOUT_ABS counts on CLOCK_MONOTONIC, which steady_clock reads.
  if (at && (!armed_deadline_ || *at < *armed_deadline_)) arm_timeout(*at);
  ring_.submit_and_wait();
  sleeping.store(false);
  rt.sleepers.fetch_sub(1);
}

void loop::run() noexcept {
  thread_state& ts = this_thread();
  ts.current_loop = this;
  ts.loop_stopping = &stopping_;
  turn_ns_.store(now_ns(), std::memory_order_relaxed);
  std::int64_t last_help = 0;
  for (;;) {
    arm_eventfd();
    // Every turn, not only when the run queue runs dry: tasks that keep
    // waking each other on this loop (a lock hand-off, a coordinator grant)
    // must not starve messages, nor wakes and spawns from other threads.
    drain_inbox();
    take_injected();
    run_ready(run_budget);
    flush_kicks();
    ring_.reap();
    const std::int64_t now = now_ns();
    // The end of this turn is the start of the next: one clock read a turn.
    turn_ns_.store(now, std::memory_order_relaxed);
    expire_timers(now);
    // Looking at a peer reads lines it writes every turn: not every turn.
    if (now - last_help >= help_interval_ns) {
      last_help = now;
      for (auto& p : rt.loops)
        if (p.get() != this) p->help(*this, now);
      pool_scavenge(now);  // paced: a clock compare until a sweep is due
    }
    if (!staged_.empty()) publish_staged();  // spawned by a timer or completion callback
    yielded.move_all_to(runq);
    queued.store(local_.size() + runq.size() + yielded.size(), std::memory_order_relaxed);
    if (!runnable() && !find_work()) {
      if (quit_) break;
      flush_kicks();
      if (!spin_for_work()) {
        arm_eventfd();
        sleep();
      }
      turn_ns_.store(now_ns(), std::memory_order_relaxed);
      ring_.reap();
    } else {
      flush_kicks();
      ring_.flush();
    }
  }
  ts.current_loop = nullptr;
  ts.loop_stopping = nullptr;
}

// ---- what the context protocol asks of its loop (context_host.hpp) -----------

void schedule(task_context* ctx) noexcept {
  loop* cur = this_thread().current_loop;
  loop* last = ctx->last;
  // Its frames are warm in the cache of the loop that ran it last.
  if (cur != nullptr && &cur->rt == &last->rt) cur->push(ctx);
  else last->push_remote(ctx);
}

void requeue_here(task_context* ctx, bool yielded) noexcept {
  loop* l = this_thread().current_loop;
  if (yielded) l->push_yielded(ctx);
  else l->push(ctx);
}

void join_live_list(task_context* ctx) noexcept { this_thread().current_loop->link_live(ctx); }

void strand_ended(task_context* ctx) noexcept {
  if (ctx->live_owner != nullptr) ctx->live_owner->unlink_live(ctx);
  this_thread().current_loop->count_completion();
}

// ---- starting contexts on the current loop (context.hpp) ----------------------

void start_on_current_loop(task_context* ctx) {
  loop* l = this_thread().current_loop;
  if (l == nullptr) throw std::logic_error("weft: a child task can only be started from a loop thread");
  ctx->run = &claim_context;
  l->count_spawn();
  l->push_spawn(ctx);
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

}  // namespace weft::detail
