// lib/fresh_queue.hpp — spawned tasks that have not started yet.
//
// The one queue other loops may take from: a task that has never run has no
// home yet, so an idle loop can steal it and make itself its home. A
// brief_spin_mutex guards the intrusive list (pushes and batch pops are
// short); `size_` is readable without the lock so a loop about to sleep, or
// one looking for a victim, can see work cheaply.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <mutex>

#include "brief_spin_mutex.hpp"
#include "run_queue.hpp"

namespace weft::detail {

class fresh_queue {
 public:
  void push(sched_node* c) noexcept {
    std::lock_guard<brief_spin_mutex> g(mu_);
    list_.push(c);
    // seq_cst: part of the sleep handshake — a loop that published "sleeping"
    // must either see this size or be seen sleeping by the pusher.
    size_.store(list_.size());
  }

  // Moves every node of `from` to the back, under one lock.
  void push_all(run_queue& from) noexcept {
    std::lock_guard<brief_spin_mutex> g(mu_);
    list_.push_all(from);
    size_.store(list_.size());  // seq_cst: as in push
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
      std::lock_guard<brief_spin_mutex> g(mu_);
      all.push_all(list_);
      // Not zero while we hold the rest: a loop deciding whether to sleep
      // must still see that work exists (it is back within a moment).
      if (all.size() <= max) size_.store(0);
    }
    const std::size_t n = std::min(max, all.size());
    all.move_front_to(out, n);
    if (!all.empty()) {
      std::lock_guard<brief_spin_mutex> g(mu_);
      list_.push_front_all(all);
      size_.store(list_.size());  // seq_cst: as in push
    }
    return n;
  }

  std::size_t size() const noexcept { return size_.load(); }

 private:
  brief_spin_mutex mu_;
  run_queue list_;
  std::atomic<std::size_t> size_{0};
};

}  // namespace weft::detail
