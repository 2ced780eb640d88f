// lib/loop.cpp — the turn of an event loop; see loop.hpp for who owns what.
//
// One turn: take the inbox and a batch of the own fresh queue (every turn, so
// neither starves behind tasks that keep waking each other); run up to
// `budget` ready nodes (refilling, then stealing, when they run out); reap
// io_uring completions; fire due timers; and, only when nothing at all is
// runnable, sleep in the kernel with one io_uring timeout armed for the
// wheel's earliest expiry.
#include "loop.hpp"

#include <weft/detail/block_pool.hpp>
#include <weft/errors.hpp>

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <ctime>
#include <system_error>

#include "runtime_impl.hpp"

namespace weft::detail {

namespace {
// How many ready nodes run before the loop looks at its inbox, completions and
// timers again: large enough to amortise the checks, small enough that a wake
// from another thread or a due timer waits for at most a few microseconds.
constexpr unsigned run_budget = 128;
// How many never-run tasks a loop moves from a fresh queue to its run queue at
// once; they stop being stealable there, so keep it small.
constexpr std::size_t fresh_batch = 32;
// How many of its own spawns a loop stages before it moves them to its
// stealable queue: one lock per batch instead of one per spawn (the lock is
// what a thief contends on). Staged tasks are published anyway as soon as
// the spawning task parks.
constexpr std::size_t stage_batch = 32;
// Most tasks one steal takes: half the victim's queue, up to this many.
constexpr std::size_t steal_max = 128;
// How long a loop that just ran out of work polls its own inbox, fresh queue
// and ring before it sleeps in the kernel. Waking a sleeping loop costs an
// eventfd write and, on a virtual machine whose idle vCPU halted, tens of
// microseconds; work that comes back within this window (an offload's
// result, a wake from the other loop) is picked up without either. It polls
// only what is its own: reading a busy peer's fresh queue would bounce that
// peer's cache line on every spawn (measured: W1 fell by a third). An idle
// loop spins once, then sleeps, so idle CPU stays near zero.
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
    drop_scheduled_jobs(*self);
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

void loop::push_fresh(sched_node* c) noexcept {
  if (this_thread().current_loop == this) {
    staged_.push(c);
    if (staged_.size() >= stage_batch) publish_staged();
    return;
  }
  outside_wake([&] {
    fresh.push(c);
    kick();
    rt.wake_idle_peer(this);
  });
}

void loop::publish_staged() noexcept {
  fresh.push_all(staged_);
  rt.wake_idle_peer(this);
}

void loop::kick() noexcept {
  // seq_cst load: the pusher's half of the sleep handshake (see loop.hpp).
  if (sleeping.load() && sleeping.exchange(false)) {
    std::uint64_t one = 1;
    // The read armed on the ring completes and the kernel wakes the loop.
    // A failed write (only EAGAIN at counter overflow) still leaves it readable.
    [[maybe_unused]] auto n = ::write(eventfd_, &one, sizeof one);
  }
}

void loop::begin_stop() noexcept { post(&stop_msg_); }
void loop::quit() noexcept { post(&quit_msg_); }

void loop::link_live(task_context* c) noexcept {
  c->live_next = &live_head_;
  c->live_prev = live_head_.live_prev;
  live_head_.live_prev->live_next = c;
  live_head_.live_prev = c;
}

void loop::unlink_live(task_context* c) noexcept {
  c->live_prev->live_next = c->live_next;
  c->live_next->live_prev = c->live_prev;
  c->live_next = c->live_prev = nullptr;
}

void loop::drain_inbox() noexcept {
  sched_node* last = nullptr;
  std::size_t count = 0;
  if (sched_node* first = inbox_.take_all(&last, &count)) ready_.push_chain(first, last, count);
}

bool loop::take_work() noexcept {
  drain_inbox();
  if (!ready_.empty()) return true;
  if (fresh.take(ready_, fresh_batch) > 0) return true;
  return rt.steal_into(*this, ready_, steal_max) > 0;
}

void loop::run_ready(unsigned budget) noexcept {
  while (budget-- > 0) {
    sched_node* n = ready_.pop();
    if (n == nullptr && (!take_work() || (n = ready_.pop()) == nullptr)) return;
    n->run(n);
    if (!staged_.empty()) publish_staged();
  }
}

void loop::expire_timers() noexcept {
  if (wheel_.size() == 0) return;
  wheel_.advance(now_ns(), [](timer_node* t) noexcept { t->fire(t); });
  armed_timers.store(wheel_.size(), std::memory_order_relaxed);
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
  return !ready_.empty() || !deferred_.empty() || !inbox_.empty() || rt.any_fresh_work();
}

bool loop::spin_for_work() noexcept {
  std::int64_t until = now_ns() + idle_spin_ns;
  if (auto next = wheel_.next_expiry()) until = std::min(until, *next);  // a due timer ends the spin
  do {
    for (int i = 0; i < 32; ++i) {
      if (!inbox_.empty() || fresh.size() > 0 || ring_.has_completions() || quit_) return true;
      __builtin_ia32_pause();
    }
  } while (now_ns() < until);
  return false;
}

void loop::sleep() noexcept {
  flush_kicks();  // never sleep on a deferred kick
  pool_flush();   // nor on blocks other loops may be waiting to reuse
  // seq_cst: the loop's half of the sleep handshake (see loop.hpp).
  sleeping.store(true);
  rt.sleepers.fetch_add(1);
  if (has_visible_work() || quit_) {
    sleeping.store(false);
    rt.sleepers.fetch_sub(1);
    return;
  }
  if (auto next = wheel_.next_expiry()) {
    // Wake near the earliest deadline inside its tick rather than at the
    // tick's end (lateness well under a tick), but at most min_wake_gap_
    // apart, so a crowded tick costs a few wakes, not one per deadline.
    const std::int64_t hint = *wheel_.next_deadline_hint();
    const std::int64_t at = std::min(*next, std::max(hint, now_ns() + min_wake_gap_));
    // IORING_TIMEOUT_ABS counts on CLOCK_MONOTONIC, which steady_clock reads.
    if (!armed_deadline_ || at < *armed_deadline_) arm_timeout(at);
  }
  ring_.submit_and_wait();
  sleeping.store(false);
  rt.sleepers.fetch_sub(1);
}

void loop::run() noexcept {
  thread_state& ts = this_thread();
  ts.current_loop = this;
  for (;;) {
    arm_eventfd();
    // Every turn, not only when the run queue runs dry: tasks that keep
    // waking each other on this loop (a lock hand-off, a coordinator grant)
    // must not starve wakes and cancels from other threads, nor new spawns.
    drain_inbox();
    if (ready_.size() < run_budget) fresh.take(ready_, fresh_batch);
    run_ready(run_budget);
    flush_kicks();
    ring_.reap();
    expire_timers();
    if (!deferred_.empty()) ready_.push_all(deferred_);
    if (!staged_.empty()) publish_staged();  // spawned by a timer or completion callback
    queued.store(ready_.size() + fresh.size(), std::memory_order_relaxed);
    if (ready_.empty() && !take_work()) {
      if (quit_) break;
      flush_kicks();
      if (!spin_for_work()) {
        arm_eventfd();
        sleep();
      }
      ring_.reap();
    } else {
      flush_kicks();
      ring_.flush();
    }
  }
  ts.current_loop = nullptr;
}

}  // namespace weft::detail
