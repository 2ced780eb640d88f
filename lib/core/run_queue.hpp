// lib/core/run_queue.hpp — a loop's own FIFO of runnable nodes.
//
// Intrusive (the link is sched_node::next), so queueing never allocates; touched
// by the owning loop thread only. A node is in at most one queue at a time:
// the wake protocol (one wake per suspension) guarantees it for contexts, and
// each message node has a single sender.
#pragma once

#include <cstddef>

#include <weft/detail/sched_node.hpp>

namespace weft::detail {

class run_queue {
 public:
  bool empty() const noexcept { return head_ == nullptr; }
  std::size_t size() const noexcept { return size_; }

  void push(sched_node* n) noexcept {
    n->next = nullptr;
    if (tail_) tail_->next = n;
    else head_ = n;
    tail_ = n;
    ++size_;
  }
  // Appends an already linked chain first..last of `count` nodes.
  void push_chain(sched_node* first, sched_node* last, std::size_t count) noexcept {
    last->next = nullptr;
    if (tail_) tail_->next = first;
    else head_ = first;
    tail_ = last;
    size_ += count;
  }
  // Moves every node of `from` to the back of this queue.
  void push_all(run_queue& from) noexcept {
    if (from.empty()) return;
    push_chain(from.head_, from.tail_, from.size_);
    from.head_ = from.tail_ = nullptr;
    from.size_ = 0;
  }
  sched_node* pop() noexcept {
    sched_node* n = head_;
    if (n) {
      head_ = n->next;
      if (!head_) tail_ = nullptr;
      --size_;
    }
    return n;
  }
  // Moves every node of `from` to the front of this queue, keeping its order.
  void push_front_all(run_queue& from) noexcept {
    if (from.empty()) return;
    from.tail_->next = head_;
    if (!head_) tail_ = from.tail_;
    head_ = from.head_;
    size_ += from.size_;
    from.head_ = from.tail_ = nullptr;
    from.size_ = 0;
  }
  // Moves the first min(n, size()) nodes to the back of `out`; walks them.
  void move_front_to(run_queue& out, std::size_t n) noexcept {
    while (n-- > 0) {
      sched_node* x = pop();
      if (!x) return;
      out.push(x);
    }
  }

 private:
  sched_node* head_ = nullptr;
  sched_node* tail_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace weft::detail
