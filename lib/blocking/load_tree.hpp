// lib/blocking/load_tree.hpp — the least and the most loaded of a set of numbered
// slots, with ties to the lowest slot: a tournament tree.
//
// The bounded elastic pool needs, per admission at its thread cap, the live
// worker with the fewest queued jobs, and per worker that runs dry the one
// with the most; each the lowest-numbered of equals, as a scan in slot order
// finds them. This answers both at the root in O(1), and a change of one
// slot's load costs one walk from its leaf to the root, O(log slots), which
// stops early at the first node it leaves unchanged.
//
// Each node keeps the best key of its subtree for both questions:
//   lo = load << 32 | slot                 (least load, then lowest slot)
//   hi = load << 32 | (0xffffffff - slot)  (most load, then lowest slot)
// so a node is the min (lo) and max (hi) of its two children, and comparing
// keys is comparing (load, slot) pairs. A slot not in the set has lo = ~0 and
// hi = 0, which never win.
//
//   nodes_[1]                 root: best of slots [0, cap)
//   nodes_[2], nodes_[3]      best of [0, cap/2) and [cap/2, cap)
//   ...
//   nodes_[cap + s]           leaf: slot s alone
//
// Invariants:
//  T1 Every inner node i holds {min, max} of nodes_[2i] and nodes_[2i+1].
//  T2 A leaf holds its slot's keys while the slot is in the set, the absent
//     keys otherwise.
// Loads saturate at 2^32 - 1 in the keys: beyond that (four billion jobs in
// one queue, more memory than a machine has) ties would go to the lower slot
// whatever the true loads. Slots are numbered below 2^32 (max_threads is
// unsigned). Not thread-safe: the pool calls it under its mutex.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft::detail {

class load_tree {
 public:
  static constexpr std::uint32_t none = ~std::uint32_t{0};

  // Room for slots [0, slots). Allocates (and rebuilds, O(cap)) only when
  // `slots` passes the capacity, which then doubles.
  void reserve(std::size_t slots) {
    if (slots <= cap_) return;
    std::size_t cap = cap_ ? cap_ : 8;
    while (cap < slots) cap *= 2;
    std::vector<node> nodes(2 * cap, absent);
    std::copy(nodes_.begin() + static_cast<std::ptrdiff_t>(cap_), nodes_.end(),
              nodes.begin() + static_cast<std::ptrdiff_t>(cap));
    nodes_.swap(nodes);
    cap_ = cap;
    for (std::size_t i = cap_ - 1; i >= 1; --i) nodes_[i] = join(nodes_[2 * i], nodes_[2 * i + 1]);
  }

  // Puts `slot` in the set at `load`, or moves it there. Precondition:
  // slot < the reserved count.
  void set(std::uint32_t slot, std::size_t load) noexcept {
    const std::uint64_t l = std::min<std::uint64_t>(load, 0xffffffffu) << 32;
    put(slot, node{l | slot, l | (0xffffffffu - slot)});
  }
  void erase(std::uint32_t slot) noexcept { put(slot, absent); }

  // The slot with the least load (the lowest of equals), or none if the set is empty.
  std::uint32_t least() const noexcept {
    return cap_ && nodes_[1].lo != absent.lo ? static_cast<std::uint32_t>(nodes_[1].lo) : none;
  }
  // The slot with the most load (the lowest of equals), or none if no slot
  // has a load above 0.
  std::uint32_t most() const noexcept {
    return cap_ && (nodes_[1].hi >> 32) != 0 ? 0xffffffffu - static_cast<std::uint32_t>(nodes_[1].hi) : none;
  }

  // For audits: whether T1 holds everywhere.
  bool consistent() const noexcept {
    for (std::size_t i = 1; i < cap_; ++i) {
      const node j = join(nodes_[2 * i], nodes_[2 * i + 1]);
      if (j.lo != nodes_[i].lo || j.hi != nodes_[i].hi) return false;
    }
    return true;
  }

 private:
  struct node {
    std::uint64_t lo, hi;
  };
  static constexpr node absent{~std::uint64_t{0}, 0};

  static node join(node a, node b) noexcept { return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)}; }

  void put(std::uint32_t slot, node leaf) noexcept {
    std::size_t i = cap_ + slot;
    nodes_[i] = leaf;
    for (i >>= 1; i >= 1; i >>= 1) {
      const node j = join(nodes_[2 * i], nodes_[2 * i + 1]);
      // Unchanged here means unchanged above: a parent depends only on its children.
      if (j.lo == nodes_[i].lo && j.hi == nodes_[i].hi) break;
      nodes_[i] = j;
    }
  }

  std::vector<node> nodes_;  // 2 * cap_ entries; [0] unused
  std::size_t cap_ = 0;      // a power of two, or 0 before the first reserve
};

}  // namespace weft::detail
