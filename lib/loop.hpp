// lib/loop.hpp — one event loop: a thread, its io_uring, its queues, its timers.
//
// Who touches what:
//  * ready_, the live list, the timer wheel, stopping_ — the loop thread only.
//  * inbox_ — any thread pushes, the loop takes (wakes and cancel deliveries
//    from other threads, spawns from plain threads).
//  * fresh — spawned, never-run tasks: pushed by the owner (or a plain thread),
//    taken by the owner or stolen by an idle peer. The owner stages its own
//    spawns in `staged_` and moves them to `fresh` in batches, under one lock
//    per batch, and always before the task that spawned them parks: so a
//    spawn costs no lock of its own, yet work never hides from peers while
//    the loop waits.
//  * sleeping — the sleep handshake. The loop publishes sleeping = true, then
//    re-checks its inbox and every fresh queue; a pusher publishes its node,
//    then reads sleeping. Both sides are seq_cst, so at least one of them sees
//    the other: either the loop finds the work, or the pusher writes the
//    eventfd whose read is always armed on the loop's ring, and the kernel
//    wakes the loop.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>

#include <weft/detail/context.hpp>

#include "fresh_queue.hpp"
#include "inbox.hpp"
#include "ring.hpp"
#include "run_queue.hpp"
#include "timer_wheel.hpp"

namespace weft::detail {

class runtime_impl;

struct scheduled_job;

// Disarms and releases the scheduled jobs still armed on l (at shutdown).
void drop_scheduled_jobs(loop& l) noexcept;

class loop {
 public:
  loop(runtime_impl& rt, unsigned index, unsigned ring_entries, std::chrono::nanoseconds tick,
       ring_faults* faults);
  ~loop();
  loop(const loop&) = delete;
  loop& operator=(const loop&) = delete;

  void run() noexcept;  // the thread body; returns after quit()

  // Any thread.
  void post(sched_node* n) noexcept;
  void push_fresh(sched_node* c) noexcept;
  void kick() noexcept;                 // wake the loop if it is asleep, now
  void begin_stop() noexcept;           // cancel every live task, refuse to start new ones
  void quit() noexcept;                 // leave run() once the queues are empty

  // Loop thread only.
  void push_local(sched_node* n) noexcept { ready_.push(n); }
  void push_deferred(sched_node* n) noexcept { deferred_.push(n); }
  bool stopping() const noexcept { return stopping_.load(std::memory_order_relaxed); }
  void link_live(task_context* c) noexcept;
  void unlink_live(task_context* c) noexcept;
  timer_wheel& timers() noexcept { return wheel_; }
  void count_spawn() noexcept { bump(spawned); }
  void count_completion() noexcept { bump(completed); }

  runtime_impl& rt;
  const unsigned index;
  fresh_queue fresh;
  std::atomic<bool> sleeping{false};
  // Written by this loop's thread only, read by stats() and shutdown().
  std::atomic<std::uint64_t> spawned{0}, completed{0};
  std::atomic<std::size_t> armed_timers{0}, queued{0};
  // Scheduled jobs armed or running here (the scheduling loop; scheduler.cpp).
  scheduled_job* scheduled_jobs = nullptr;

 private:
  static void bump(std::atomic<std::uint64_t>& c) noexcept {
    // A single writer: load+store needs no locked instruction. release pairs
    // with the acquire loads in runtime_impl::live(), which must see a
    // completion's preceding spawns.
    c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  void drain_inbox() noexcept;
  bool take_work() noexcept;   // refill ready_ from inbox, own fresh queue, or a peer
  void run_ready(unsigned budget) noexcept;
  void expire_timers() noexcept;
  bool spin_for_work() noexcept;  // true when work showed up before idle_spin_ns
  void sleep() noexcept;
  void arm_eventfd() noexcept;
  void arm_timeout(std::int64_t deadline_ns) noexcept;
  bool has_visible_work() const noexcept;
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
  // when the wheel's earliest expiry moves earlier than it.
  std::optional<std::int64_t> armed_deadline_;
  __kernel_timespec timeout_ts_{};

  run_queue ready_;
  run_queue deferred_;  // yielded: rejoins ready_ after timers and completions
  run_queue staged_;    // spawned here, not yet in `fresh` (see publish_staged)
  void publish_staged() noexcept;
  inbox inbox_;
  timer_wheel wheel_;
  std::int64_t min_wake_gap_;  // a quarter tick: see sleep()
  task_context live_head_;  // sentinel of the circular live list
  std::atomic<bool> stopping_{false};
  bool quit_ = false;
  std::uint64_t kick_mask_ = 0;  // peers (by index) to kick at the end of this batch
  sched_node stop_msg_, quit_msg_;
};

}  // namespace weft::detail
