// lib/time/timer_wheel.cpp — the out-of-line half of timer_wheel: building and
// tearing down, moving time forward (collect) and ordering a batch.
//
// collect() keeps the header's invariants I1–I5 across a move of the position
// P to P' = floor(now) + 1: it visits occupied slots in time order, fires the
// level-0 ones that lie wholly before P', cascades the higher ones whose start
// has been reached, and for the slot of P' itself (the tick now is inside)
// takes only the nodes with deadline <= now.
#include "time/timer_wheel.hpp"

#include <algorithm>
#include <utility>
#include <stdexcept>
#include <string>

namespace weft::detail {

namespace {

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

// Detaches head's list as a null-terminated chain (nullptr if empty) and
// leaves head empty.
timer_link* detach(timer_link& head) noexcept {
  if (head.next == &head) return nullptr;
  timer_link* first = head.next;
  head.prev->next = nullptr;
  head.prev = head.next = &head;
  return first;
}

}  // namespace

timer_wheel::timer_wheel(std::chrono::nanoseconds tick, std::int64_t now_ns)
    : tick_(0), origin_(now_ns), last_now_(now_ns) {
  if (tick.count() <= 0) {
    throw std::invalid_argument("weft: timer_tick must be a positive duration (got " +
                                std::to_string(tick.count()) + " ns)");
  }
  tick_ = static_cast<std::uint64_t>(tick.count());
  level0_min_.fill(kNever);
  for (auto& level : slots_)
    for (auto& head : level) init_head(head);
  for (auto& slot : level1_)
    for (auto& head : slot) init_head(head);
  for (auto& slot : level1_min_)
    for (auto& m : slot) m = kNever;
  init_head(pending_);
  init_head(expired_);
}

timer_wheel::~timer_wheel() {
  auto disarm_all = [](timer_link& head) {
    for (timer_link* l = detach(head); l != nullptr;) {
      timer_link* const next = l->next;
      l->prev = l->next = nullptr;
      l = next;
    }
  };
  for (auto& level : slots_)
    for (auto& head : level) disarm_all(head);
  for (auto& slot : level1_)
    for (auto& head : slot) disarm_all(head);
  disarm_all(pending_);
  disarm_all(expired_);
}

std::int64_t timer_wheel::time_of(std::uint64_t ticks) const noexcept {
  // A slot start can lie past INT64_MAX (a clamped far deadline with a coarse
  // tick); such a time is never reached, so report "never" rather than wrap.
  // Unsigned throughout: with a negative origin the span alone may exceed
  // INT64_MAX while origin + span does not.
  std::uint64_t span;
  if (__builtin_mul_overflow(ticks, tick_, &span)) return kNever;
  const std::uint64_t headroom = static_cast<std::uint64_t>(kNever) - static_cast<std::uint64_t>(origin_);
  if (span > headroom) return kNever;
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(origin_) + span);
}

std::optional<std::int64_t> timer_wheel::next_expiry() const noexcept {
  // Nodes already due (pending_, or a batch left by a throwing on_expired)
  // all have deadline <= last_now < any slotted deadline.
  const bool have_pending = !list_empty(pending_);
  if (!list_empty(expired_)) {
    const std::int64_t head = static_cast<const timer_node*>(expired_.next)->deadline;  // sorted: the minimum
    return have_pending ? std::min(head, pending_min_) : head;
  }
  if (have_pending) return pending_min_;
  for (unsigned level = 0; level < wheel::levels; ++level) {
    if (occupied_[level] == 0) continue;
    // By I2 the lowest non-empty level holds the earliest slot. On level 0 its
    // start is exactly W, the deadline rounded up to its tick; higher up it is
    // the moment the slot must cascade, which is no later than any W in it.
    const unsigned slot = static_cast<unsigned>(std::countr_zero(occupied_[level]));
    return time_of(wheel::slot_start(pos_, level, slot));
  }
  return std::nullopt;
}

std::optional<std::int64_t> timer_wheel::next_deadline_hint() const noexcept {
  const std::optional<std::int64_t> expiry = next_expiry();
  if (!expiry || !list_empty(pending_) || !list_empty(expired_) || occupied_[0] == 0) return expiry;
  // Level 0 is non-empty, so by I2 its lowest slot is the one next_expiry()
  // named; every deadline in it lies in (end - tick, end].
  const unsigned slot = static_cast<unsigned>(std::countr_zero(occupied_[0]));
  const std::int64_t end = *expiry;
  const std::int64_t begin = end - static_cast<std::int64_t>(tick_);
  return std::clamp(level0_min_[slot], begin, end);
}

void timer_wheel::collect(std::int64_t now_ns) noexcept {
  const std::int64_t now = std::max(now_ns, last_now_);
  std::uint64_t floor_ticks = (static_cast<std::uint64_t>(now) - static_cast<std::uint64_t>(origin_)) / tick_;
  if (floor_ticks == std::numeric_limits<std::uint64_t>::max()) --floor_ticks;  // only at tick 1 ns, origin INT64_MIN
  const std::uint64_t target = floor_ticks + 1;  // P'

  // Appending to the batch notes whether it is still in order, so the common
  // batch (one slot, armed in deadline order) skips the sort.
  bool sorted = true;
  const timer_node* tail = list_empty(expired_) ? nullptr : as_node(expired_.prev);
  auto to_batch = [&](timer_link* l) {
    timer_node* const n = as_node(l);
    if (tail != nullptr && before(n, tail)) sorted = false;
    link_back(expired_, n);
    tail = n;
  };

  for (timer_link* l = detach(pending_); l != nullptr;) {
    timer_link* const next = l->next;
    to_batch(l);
    l = next;
  }
  pending_min_ = kNever;

  // Clamped nodes (I1) whose slot came up before their deadline; they are
  // re-placed once P has reached P', where they are no longer clamped as much.
  timer_link deferred;
  init_head(deferred);

  for (;;) {
    unsigned level = 0;
    while (level < wheel::levels && occupied_[level] == 0) ++level;
    if (level == wheel::levels) break;
    const unsigned slot = static_cast<unsigned>(std::countr_zero(occupied_[level]));
    const std::uint64_t start = wheel::slot_start(pos_, level, slot);
    assert(start >= pos_);
    if (start > target) break;
    timer_link& head = slots_[level][slot];

    if (level == 0 && start == target) {
      // The tick now is inside: its nodes have deadlines in (now - tick, P'],
      // so take those <= now and leave the rest. I5 skips the walk when none
      // can be due, which is the usual case (the loop woke at a boundary).
      if (level0_min_[slot] > now) break;
      std::int64_t rest_min = kNever;
      for (timer_link* l = head.next; l != &head;) {
        timer_link* const next = l->next;
        timer_node* const n = as_node(l);
        if (n->deadline <= now) {
          l->prev->next = next;
          next->prev = l->prev;
          to_batch(l);
        } else {
          rest_min = std::min(rest_min, n->deadline);
        }
        l = next;
      }
      level0_min_[slot] = rest_min;
      if (list_empty(head)) occupied_[0] &= ~(std::uint64_t{1} << slot);
      break;
    }

    pos_ = start;  // keeps I2 for every other node: start is the earliest slot
    occupied_[level] &= ~(std::uint64_t{1} << slot);
    if (level == 1) {
      // Seen from P = start, a node of sub-list d is at level 0, slot d; level
      // 0 is empty (this slot is the earliest), so each sub-list becomes a
      // level-0 slot as it is, in arming order.
      for (std::uint64_t subs = std::exchange(level1_sub_[slot], 0); subs != 0; subs &= subs - 1) {
        const unsigned digit = static_cast<unsigned>(std::countr_zero(subs));
        timer_link& from = level1_[slot][digit];
        timer_link& to = slots_[0][digit];
        assert(list_empty(to));
        to.next = from.next;
        to.prev = from.prev;
        to.next->prev = &to;
        to.prev->next = &to;
        init_head(from);
        occupied_[0] |= std::uint64_t{1} << digit;
        level0_min_[digit] = std::exchange(level1_min_[slot][digit], kNever);
      }
      continue;
    }
    timer_link* chain = detach(head);
    if (level == 0) {
      level0_min_[slot] = kNever;
      for (timer_link* l = chain; l != nullptr;) {
        timer_link* const next = l->next;
        if (as_node(l)->deadline <= now) {
          to_batch(l);
        } else {
          link_back(deferred, l);  // only a clamped node can be here and not due
        }
        l = next;
      }
    } else {
      // Cascade, keeping list order: whatever reached this slot by an earlier
      // cascade got there before anything could be armed straight into it, so
      // lists stay in arming order and the final sort rarely has work to do.
      for (timer_link* l = chain; l != nullptr;) {
        timer_link* const next = l->next;
        place(as_node(l));
        assert(wheel::level_for(pos_, tick_of(as_node(l)->deadline)) < level);
        l = next;
      }
    }
  }

  pos_ = target;
  last_now_ = now;
  for (timer_link* l = detach(deferred); l != nullptr;) {
    timer_link* const next = l->next;
    place(as_node(l));
    l = next;
  }
  if (!sorted) sort_expired();
}

namespace {

template <class Before>
timer_link* merge(timer_link* a, timer_link* b, Before before) noexcept {
  timer_link head;
  timer_link* tail = &head;
  while (a != nullptr && b != nullptr) {
    if (before(b, a)) {
      tail->next = b;
      b = b->next;
    } else {
      tail->next = a;
      a = a->next;
    }
    tail = tail->next;
  }
  tail->next = a != nullptr ? a : b;
  return head.next;
}

}  // namespace

void timer_wheel::sort_expired() noexcept {
  auto less = [](timer_link* a, timer_link* b) { return before(as_node(a), as_node(b)); };
  // Bottom-up merge sort on the singly linked view: runs[k] is a sorted run of
  // 2^k nodes, and adding a node carries like incrementing a binary counter.
  // No allocation, O(n log n); the prev links are rebuilt afterwards.
  timer_link* runs[64] = {};
  for (timer_link* l = detach(expired_); l != nullptr;) {
    timer_link* carry = l;
    l = l->next;
    carry->next = nullptr;
    unsigned k = 0;
    for (; runs[k] != nullptr; ++k) {
      carry = merge(runs[k], carry, less);
      runs[k] = nullptr;
    }
    runs[k] = carry;
  }
  timer_link* all = nullptr;
  for (timer_link* run : runs)
    if (run != nullptr) all = merge(run, all, less);

  timer_link* prev = &expired_;
  for (timer_link* l = all; l != nullptr; l = l->next) {
    l->prev = prev;
    prev->next = l;
    prev = l;
  }
  prev->next = &expired_;
  expired_.prev = prev;
}

}  // namespace weft::detail
