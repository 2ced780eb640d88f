// lib/fresh_queue.hpp — spawned tasks that have not started yet.
//
// The one queue other loops may take from: a task that has never run has no
// home yet, so an idle loop can steal it and make itself its home. A
// brief_spin_mutex guards the intrusive list (pushes and batch pops are
// short); `size_` is readable without the lock so a loop about to sleep, or
// one looking for a victim, can see work cheaply.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>

#include "brief_spin_mutex.hpp"
#include "run_queue.hpp"

namespace weft::detail {

class fresh_queue {
 public:
  void push(task_context* c) noexcept {
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

  // Moves up to `max` of the oldest nodes into `out`; returns how many.
  std::size_t take(run_queue& out, std::size_t max) noexcept {
    if (size_.load(std::memory_order_relaxed) == 0) return 0;
    std::lock_guard<brief_spin_mutex> g(mu_);
    std::size_t n = 0;
    while (n < max) {
      sched_node* c = list_.pop();
      if (!c) break;
      out.push(c);
      ++n;
    }
    size_.store(list_.size());
    return n;
  }

  std::size_t size() const noexcept { return size_.load(); }

 private:
  brief_spin_mutex mu_;
  run_queue list_;
  std::atomic<std::size_t> size_{0};
};

}  // namespace weft::detail
