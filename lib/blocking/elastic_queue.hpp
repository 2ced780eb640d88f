// lib/blocking/elastic_queue.hpp — a worker's queue of jobs: an intrusive FIFO of job_node.
//
// Intrusive and doubly linked so that queueing allocates nothing and a
// cancelled awaiter's job can be unlinked from the middle in O(1). Every
// operation runs under the pool's mutex, and changes go through
// elastic_backlog, which keeps the pool's figures and its index of queue
// lengths in step. Invariant: a node is in at most one queue, and
// node->queue == this exactly while it is linked here.
#pragma once

#include <weft/detail/job_node.hpp>

#include <cassert>
#include <cstddef>
#include <cstdint>

namespace weft::detail {

class elastic_queue {
 public:
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

  void push_back(job_node* n) noexcept {
    assert(n->queue == nullptr);
    n->queue = this;
    n->next = nullptr;
    n->prev = tail_;
    (tail_ ? tail_->next : head_) = n;
    tail_ = n;
    ++size_;
  }

  job_node* pop_front() noexcept {
    job_node* n = head_;
    if (n) unlink(n);
    return n;
  }

  // Precondition: n->queue == this.
  void unlink(job_node* n) noexcept {
    assert(n->queue == this);
    (n->prev ? n->prev->next : head_) = n->next;
    (n->next ? n->next->prev : tail_) = n->prev;
    n->prev = n->next = nullptr;
    n->queue = nullptr;
    --size_;
  }

  std::uint32_t slot = 0;  // its worker's slot number (elastic_backlog)
  bool open = false;       // its worker is live: it may be handed jobs

 private:
  job_node* head_ = nullptr;
  job_node* tail_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace weft::detail
