// lib/blocking/elastic_backlog.hpp — every job a bounded_elastic pool holds queued: one
// FIFO per worker slot, and which of them is shortest and longest.
//
// Admission at the thread cap wants the live worker with the shortest queue,
// and a worker that runs dry the one with the longest, each the
// lowest-numbered slot of equals. Up to `index_from` slots a scan of the
// slots in order finds them; from there on a load_tree (load_tree.hpp) keeps
// them at its root, O(log slots) per queue change, so the cost no longer
// grows with the workers. Both give the same answers (tested).
//
// Why a scan below the threshold: the index is updated on every push and
// pop, under the pool's lock, where W4b (bench/weft/w4_offload.cpp) queues.
// On the 2-vCPU VM, W4b's workload measured, in offloads/s, index kept on
// every change against the scan: 3.2-3.7M against 3.6-4.1M with 20
// workers (the default cap there), 3.2-3.4M against 2.5-2.7M with 64, and
// 3.2-3.3M against 0.6M with 640. A scan reads at most index_from slots,
// a bounded cost.
//
// Under the discard_oldest policy it also keeps every queued job in the
// order of admission (job_node::older/newer), so the job that has waited
// longest in any queue is at hand in O(1); the other policies pay nothing
// for it.
//
// Every change to a queue goes through this class, so the index, the age
// order and the total never drift from the queues. Runs under the pool's
// mutex.
// Invariants:
//  B1 A queue is open exactly while its worker is live; only an open queue
//     holds jobs.
//  B2 Once indexed, the tree holds every open queue at its length (and no
//     closed one).
//  B3 size() is the sum of the lengths of all queues.
//  B4 If the age order is kept, it holds every queued job once, the oldest
//     admitted first; otherwise it is empty.
#pragma once

#include "blocking/elastic_queue.hpp"
#include "blocking/load_tree.hpp"

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft::detail {

class elastic_backlog {
 public:
  // More slots than this and the tree is kept (see above): the measured
  // crossover lies between 20 and 64 workers.
  static constexpr std::size_t default_index_from = 32;

  // A new worker slot: `q` gets the next slot number. Allocates (the slot
  // table, the tree's room), as making the slot itself does.
  void add_slot(elastic_queue& q) {
    q.slot = static_cast<std::uint32_t>(queues_.size());
    queues_.push_back(&q);
    if (indexed_ || queues_.size() > index_from_) start_index();
  }

  // For tests: keep the index from `slots` slots on (0: always).
  void index_from(std::size_t slots) {
    index_from_ = slots;
    if (queues_.size() > index_from_) start_index();
  }
  bool indexed() const noexcept { return indexed_; }

  // Whether to keep the order of admission (before the first push).
  void keep_age_order(bool keep) noexcept {
    assert(size_ == 0);
    aged_ = keep;
  }

  // A worker starts (its queue empty) or leaves (its queue empty again: a
  // worker leaves only once it has found nothing to take).
  void open(elastic_queue& q) noexcept {
    assert(q.empty() && !q.open);
    q.open = true;
    if (indexed_) tree_.set(q.slot, 0);
  }
  void close(elastic_queue& q) noexcept {
    assert(q.empty() && q.open);
    q.open = false;
    if (indexed_) tree_.erase(q.slot);
  }

  // Precondition: q is open.
  void push(elastic_queue& q, job_node* n) noexcept {
    assert(q.open);
    q.push_back(n);
    changed(q);
    ++size_;
    if (aged_) {
      n->newer = nullptr;
      n->older = newest_;
      (newest_ ? newest_->newer : oldest_) = n;
      newest_ = n;
    }
  }

  // q's oldest job, or null.
  job_node* pop(elastic_queue& q) noexcept {
    job_node* n = q.pop_front();
    if (n) {
      changed(q);
      --size_;
      forget_age(n);
    }
    return n;
  }

  // Precondition: n is queued (n->queue != null).
  void unlink(job_node* n) noexcept {
    auto& q = *static_cast<elastic_queue*>(n->queue);
    q.unlink(n);
    changed(q);
    --size_;
    forget_age(n);
  }

  // The queued job admitted first, if the age order is kept and any is queued.
  job_node* oldest() const noexcept { return oldest_; }

  // The open queue with the fewest jobs (the lowest slot of equals); null
  // if none is open.
  elastic_queue* shortest() const noexcept { return indexed_ ? at(tree_.least()) : scan_shortest(); }
  // The open queue with the most jobs (the lowest slot of equals); null if
  // every queue is empty.
  elastic_queue* longest() const noexcept { return indexed_ ? at(tree_.most()) : scan_longest(); }

  std::size_t size() const noexcept { return size_; }

  // For audits: B4.
  bool age_order_consistent() const noexcept {
    std::size_t n = 0;
    for (const job_node* j = oldest_; j; j = j->newer) {
      if (!j->queue || (j->older ? j->older->newer : oldest_) != j || ++n > size_) return false;
    }
    return aged_ ? n == size_ : n == 0 && !newest_;
  }

  // For audits: B2, checked against a scan of every queue.
  bool index_consistent() const noexcept {
    return !indexed_ || (tree_.consistent() && at(tree_.least()) == scan_shortest() &&
                         at(tree_.most()) == scan_longest());
  }

 private:
  void forget_age(job_node* n) noexcept {
    if (!aged_) return;
    (n->older ? n->older->newer : oldest_) = n->newer;
    (n->newer ? n->newer->older : newest_) = n->older;
    n->older = n->newer = nullptr;
  }

  void changed(elastic_queue& q) noexcept {
    assert(q.open);  // B1
    if (indexed_) tree_.set(q.slot, q.size());
  }

  elastic_queue* at(std::uint32_t slot) const noexcept { return slot == load_tree::none ? nullptr : queues_[slot]; }

  elastic_queue* scan_shortest() const noexcept {
    elastic_queue* best = nullptr;
    for (elastic_queue* q : queues_) {
      if (q->open && (!best || q->size() < best->size())) best = q;
    }
    return best;
  }
  elastic_queue* scan_longest() const noexcept {
    elastic_queue* best = nullptr;
    for (elastic_queue* q : queues_) {
      if (!q->empty() && (!best || q->size() > best->size())) best = q;
    }
    return best;
  }

  void start_index() {
    tree_.reserve(queues_.size());
    if (indexed_) return;
    indexed_ = true;
    for (elastic_queue* q : queues_) {
      if (q->open) tree_.set(q->slot, q->size());
    }
  }

  std::vector<elastic_queue*> queues_;  // by slot number
  load_tree tree_;
  std::size_t index_from_ = default_index_from;
  bool indexed_ = false;
  bool aged_ = false;           // the age order is kept (discard_oldest)
  job_node* oldest_ = nullptr;  // the age order's ends
  job_node* newest_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace weft::detail
