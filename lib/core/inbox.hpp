// lib/core/inbox.hpp — the multi-producer, single-consumer inbox of a loop.
//
// Other threads push nodes (wakes, cancel deliveries, spawns from plain
// threads); the loop takes everything at once. It is a Treiber stack: push is
// one CAS on `head_`, take_all one exchange, and the taken chain is reversed
// so the loop runs nodes in the order they were pushed. No ABA problem: the
// consumer never pops single nodes, it swaps the whole stack out.
#pragma once

#include <atomic>

#include <weft/detail/sched_node.hpp>

namespace weft::detail {

class inbox {
 public:
  // Returns true when the inbox was empty (the consumer may need waking).
  bool push(sched_node* n) noexcept {
    sched_node* old = head_.load(std::memory_order_relaxed);
    do {
      n->next = old;
      // release: the consumer must see n's contents (and n->next) once it sees n.
    } while (!head_.compare_exchange_weak(old, n, std::memory_order_release, std::memory_order_relaxed));
    return old == nullptr;
  }

  // Takes every node, oldest first, as a chain; null when empty.
  sched_node* take_all(sched_node** last, std::size_t* count) noexcept {
    if (head_.load(std::memory_order_relaxed) == nullptr) return nullptr;
    // acquire: pairs with push's release, so the nodes' contents are visible.
    sched_node* n = head_.exchange(nullptr, std::memory_order_acquire);
    sched_node* reversed = nullptr;
    *last = n;
    *count = 0;
    while (n) {
      sched_node* next = n->next;
      n->next = reversed;
      reversed = n;
      n = next;
      ++*count;
    }
    return reversed;
  }

  // seq_cst: part of the sleep handshake (see loop.cpp, go_to_sleep).
  bool empty() const noexcept { return head_.load() == nullptr; }

 private:
  std::atomic<sched_node*> head_{nullptr};
};

}  // namespace weft::detail
