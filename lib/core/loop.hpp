// lib/core/loop.hpp — one event loop: a thread, its io_uring, its queues, its timers.
//
// Who touches what:
//  * local_, staged_, the ring, quit_ — the loop thread only. local_ holds
//    what must run here (messages from the inbox, a first run that must not
//    move); staged_ the spawns of the node running now, published to runq
//    in batches and always when that node returns.
//  * yielded — tasks that yielded this turn: the owner moves them to runq
//    once it has looked at its timers and completions; a peer may steal
//    them before that, so a yielder never waits behind a busy loop.
//  * runq — runnable tasks: the owner pushes and pops, any peer steals. A
//    loop with nothing of its own to do steals half a peer's queue; a loop
//    whose peer has not started a turn for stuck_ns (a task that does not
//    suspend) steals from it even while busy, so nothing runnable waits
//    behind a busy loop while another one runs.
//  * inbox_ — any thread pushes messages for this loop, the loop takes them.
//  * the wheel — behind wheel_mu_: the owner arms, disarms and advances it,
//    any loop disarms what it armed here, and a peer fires its due timers
//    when this loop is late for them by fire_grace_ns (it is busy). Timer
//    callbacks run under the lock and must not arm or disarm on this wheel.
//  * the live list — behind live_mu_: tasks first run here, until they end
//    (wherever that is); shutdown cancels them through it.
//  * sleeping — the sleep handshake. The loop publishes sleeping = true, then
//    re-checks its inbox, the inject queue and every run queue; a pusher
//    publishes its node, then reads sleeping (or the runtime's sleeper
//    count). Both sides are seq_cst, so at least one of them sees the other:
//    either the loop finds the work, or the pusher writes the eventfd whose
//    read is always armed on the loop's ring, and the kernel wakes the loop.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>

#include <weft/detail/context.hpp>

#include "core/spin_lock.hpp"
#include "core/inbox.hpp"
#include "core/ring.hpp"
#include "core/run_queue.hpp"
#include "core/steal_queue.hpp"
#include "time/timer_wheel.hpp"

namespace weft::detail {

class runtime_impl;

class loop {
 public:
  loop(runtime_impl& rt, unsigned index, unsigned ring_entries, std::chrono::nanoseconds tick,
       ring_faults* faults);
  ~loop();
  loop(const loop&) = delete;
  loop& operator=(const loop&) = delete;

  void run() noexcept;  // the thread body; returns after quit()

  // Any thread.
  void post(sched_node* n) noexcept;    // a message that must run on this loop
  void push_remote(sched_node* n) noexcept;  // runnable work from outside this runtime's loops
  bool kick() noexcept;                 // wake the loop if it is asleep, now; true if it was
  void begin_stop() noexcept;           // cancel every live task, refuse to start new ones
  void quit() noexcept;                 // leave run() once the queues are empty
  void arm_timer(timer_node* n, std::int64_t deadline_ns) noexcept;
  bool disarm_timer(timer_node* n) noexcept;  // true when it was armed (it will not fire)
  void unlink_live(task_context* c) noexcept;
  // Loop threads of this runtime: fire this loop's due timers if it is late
  // for them, and steal half its run queue if it seems stuck.
  void help(loop& thief, std::int64_t now) noexcept;

  // Loop thread only.
  void push(sched_node* n) noexcept;
  void push_local(sched_node* n) noexcept { local_.push(n); }
  void push_yielded(sched_node* n) noexcept;
  void push_spawn(sched_node* n) noexcept;  // a new task: staged, published in batches
  bool stopping() const noexcept { return stopping_.load(std::memory_order_relaxed); }
  void link_live(task_context* c) noexcept;
  void count_spawn() noexcept { bump(spawned); }
  void count_completion() noexcept { bump(completed); }

  runtime_impl& rt;
  const unsigned index;
  steal_queue runq;
  steal_queue yielded;
  std::atomic<bool> sleeping{false};
  // Written by this loop's thread only, read by stats() and shutdown().
  std::atomic<std::uint64_t> spawned{0}, completed{0};
  std::atomic<std::size_t> armed_timers{0}, queued{0};

 private:
  static void bump(std::atomic<std::uint64_t>& c) noexcept {
    // A single writer: load+store needs no locked instruction. release pairs
    // with the acquire loads in runtime_impl::live(), which must see a
    // completion's preceding spawns.
    c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  void drain_inbox() noexcept;
  bool find_work() noexcept;   // refill from the inject queue or a peer
  bool take_injected() noexcept;  // a batch of the inject queue into runq
  void run_ready(unsigned budget) noexcept;
  void expire_timers(std::int64_t now) noexcept;
  void advance_locked(std::int64_t now) noexcept;  // wheel_mu_ held
  // Fires wheel_owner's due timers here (its wheel_mu_ held), queueing what
  // they wake at the front of this loop's run queue.
  void fire_due(loop& wheel_owner, std::int64_t now) noexcept;
  run_queue* fired_ = nullptr;  // set while fire_due runs: where push() puts wakes
  bool spin_for_work() noexcept;  // true when work showed up before idle_spin_ns
  void sleep() noexcept;
  void arm_eventfd() noexcept;
  void arm_timeout(std::int64_t deadline_ns) noexcept;
  bool has_visible_work() const noexcept;
  bool runnable() const noexcept { return !local_.empty() || runq.size() > 0 || yielded.size() > 0; }
  void flush_kicks() noexcept;
  // Like kick(), but deferred to the end of `cur`'s current batch (cur: the
  // calling loop, of the same runtime), so a burst of messages to one
  // sleeping loop costs one eventfd write, not one each.
  void kick_soon(loop* cur) noexcept;
  // Publishes and kicks from outside this runtime's loops, counted in
  // rt.outside_wakers so that the runtime outlives the kick (runtime_impl.hpp).
  template <class F>
  void outside_wake(F publish_and_kick) noexcept;

  ring ring_;
  int eventfd_ = -1;
  std::uint64_t eventfd_value_ = 0;
  struct eventfd_done : completion {
    loop* owner;
  } eventfd_done_{};
  bool eventfd_armed_ = false;
  struct timeout_done : completion {
    loop* owner;
  } timeout_done_{};
  // The deadline of the io_uring timeout in flight, if any. Re-armed only
  // when the wanted wake-up moves earlier than it.
  std::optional<std::int64_t> armed_deadline_;
  __kernel_timespec timeout_ts_{};

  run_queue local_;
  run_queue staged_;  // spawned by the node running now; see push_spawn
  void publish_staged() noexcept;
  inbox inbox_;

  spin_lock wheel_mu_;
  timer_wheel wheel_;                         // under wheel_mu_
  // The wheel's next expiry (a tick boundary: an advance there must run) and
  // its hint (the earliest deadline it knows, inside that tick: an advance
  // there fires it on time); INT64_MAX: none. Relaxed: estimates, refreshed
  // under the lock, read by this loop's turn and by peers deciding whether
  // it is late.
  std::atomic<std::int64_t> next_expiry_{INT64_MAX};
  std::atomic<std::int64_t> next_hint_{INT64_MAX};
  void publish_expiry() noexcept;             // wheel_mu_ held
  // When this loop last started a turn; relaxed, read by peers to tell a
  // stuck loop (a task that never suspends) from a busy one.
  std::atomic<std::int64_t> turn_ns_{0};
  std::int64_t min_wake_gap_;  // a quarter tick: see sleep()

  spin_lock live_mu_;
  task_context live_head_;  // sentinel of the circular live list, under live_mu_

  std::atomic<bool> stopping_{false};
  bool quit_ = false;
  std::uint64_t kick_mask_ = 0;  // peers (by index) to kick at the end of this batch
  sched_node stop_msg_, quit_msg_;
};

}  // namespace weft::detail
