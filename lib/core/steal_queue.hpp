// lib/core/steal_queue.hpp — runnable work that any loop of the runtime may take.
//
// Each loop's run queue (new tasks, woken tasks, yielded ones), and the
// runtime's inject queue (wakes and spawns from threads that are not its
// loops). The owner pushes and pops one node at a time; a loop with nothing
// to do takes a batch (half a victim's queue) at once. A spin_lock
// guards the intrusive list, and every section under it is a few pointer
// moves; `size_` is readable without the lock so a loop about to sleep, or
// one looking for a victim, can see work cheaply. FIFO: a node pushed now
// runs after everything already queued, so nothing starves behind tasks
// that keep waking each other.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <mutex>

#include "core/spin_lock.hpp"
#include "core/run_queue.hpp"

namespace weft::detail {

class steal_queue {
 public:
  void push(sched_node* c) noexcept {
    std::lock_guard<spin_lock> g(mu_);
    list_.push(c);
    // seq_cst: part of the sleep handshake — a loop that published "sleeping"
    // must either see this size or be seen sleeping by the pusher.
    size_.store(list_.size());
  }

  // Moves every node of `from` to the back, under one lock.
  void push_all(run_queue& from) noexcept {
    std::lock_guard<spin_lock> g(mu_);
    list_.push_all(from);
    size_.store(list_.size());  // seq_cst: as in push
  }

  sched_node* pop() noexcept {
    if (size_.load(std::memory_order_relaxed) == 0) return nullptr;
    std::lock_guard<spin_lock> g(mu_);
    sched_node* n = list_.pop();
    // relaxed: the owner's own pop; a sleeper re-checks with seq_cst loads,
    // and a pusher that matters stores seq_cst after us.
    if (n) size_.store(list_.size(), std::memory_order_relaxed);
    return n;
  }

  // Moves every node of `from` to the front, keeping its order: tasks whose
  // wait just ended (a timer fired) run before those that merely yielded.
  void push_front_all(run_queue& from) noexcept {
    if (from.empty()) return;
    std::lock_guard<spin_lock> g(mu_);
    list_.push_front_all(from);
    size_.store(list_.size());  // seq_cst: as in push
  }

  // Moves every node to the back of `out` in one splice (the owner's move of
  // its yielded tasks back into its run queue: no walk over the nodes).
  void move_all_to(steal_queue& out) noexcept {
    if (size_.load(std::memory_order_relaxed) == 0) return;
    run_queue all;
    {
      std::lock_guard<spin_lock> g(mu_);
      all.push_all(list_);
      size_.store(0);  // seq_cst: as in push
    }
    out.push_all(all);
  }

  // Moves up to `max` of the oldest nodes into `out`; returns how many. The
  // walk over the nodes (a cache miss each: another thread wrote them) runs
  // outside the lock: take the whole list, keep `max`, put the rest back in
  // front. Holding the lock across the walk made a busy spawner wait for the
  // thief, and sometimes sleep in the kernel (measured in W1).
  std::size_t take(run_queue& out, std::size_t max) noexcept {
    if (size_.load(std::memory_order_relaxed) == 0) return 0;
    run_queue all;
    {
      std::lock_guard<spin_lock> g(mu_);
      all.push_all(list_);
      // Not zero while we hold the rest: a loop deciding whether to sleep
      // must still see that work exists (it is back within a moment).
      if (all.size() <= max) size_.store(0);
    }
    const std::size_t n = std::min(max, all.size());
    all.move_front_to(out, n);
    if (!all.empty()) {
      std::lock_guard<spin_lock> g(mu_);
      list_.push_front_all(all);
      size_.store(list_.size());  // seq_cst: as in push
    }
    return n;
  }

  std::size_t size() const noexcept { return size_.load(); }

 private:
  spin_lock mu_;
  run_queue list_;
  std::atomic<std::size_t> size_{0};
};

}  // namespace weft::detail
