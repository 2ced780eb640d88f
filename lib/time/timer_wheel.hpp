// lib/time/timer_wheel.hpp — the per-loop hierarchical timer wheel (weft::detail).
//
// Owns the bookkeeping of one loop's armed timers: which node is due when, in
// which order due nodes are handed out, and the earliest time worth waking up
// for. It owns no memory (nodes are intrusive and live in their owners: a
// sleeping coroutine's frame, a pooled node), never reads a clock (the loop
// passes the time in), never calls a node's `fire`, never allocates, and is
// not thread-safe: exactly one thread drives a wheel.
//
// Guarantees
// - Never early: a node is handed out only by an advance(now) with
//   now >= deadline, and every armed node with deadline <= now is handed out
//   by that advance (unless it was armed from inside that advance's callback:
//   then by the next one).
// - Order: one advance hands nodes out in (deadline, arm sequence) order, so
//   equal deadlines fire in the order they were armed.
// - insert and remove are O(1) and allocation-free whatever the number of
//   armed timers; advance costs the slots it passes through plus a sort of what
//   it hands out, never one step per elapsed tick.
//
// The algorithm is Varghese & Lauck's hierarchical timing wheel ("Hashed and
// Hierarchical Timing Wheels", SOSP 1987). Time is counted in ticks from the
// wheel's origin (the time it was built at). A deadline d is kept at tick
//     W(d) = ceil((d - origin) / tick)
// — the first tick boundary at or after d — so that whole slots can fire at a
// boundary without firing anything early. The wheel's position is
//     P = floor((last_now - origin) / tick) + 1
// the tick in progress: every tick before P has been fully processed.
//
// W is read as 8 digits of 6 bits. A node sits on the level of the most
// significant digit in which W differs from P, in the slot given by W's digit
// on that level (`level_for`, `slot_for` below). Each level has 64 slots:
//
//   level  slot width    level span    span at 1 ms tick   at 10 us tick
//     0    1 tick        64 ticks      64 ms               640 us
//     1    64            64^2          4.1 s               41 ms
//     2    64^2          64^3          4.4 min             2.6 s
//     3    64^3          64^4          4.7 h               2.8 min
//     4    64^4          64^5          12.4 days           3.0 h
//     5    64^5          64^6          2.2 years           8.0 days
//     6    64^6          64^7          139 years           1.4 years
//     7    64^7          64^8 = 2^48   8,900 years         89 years
//
// When P reaches the start of an occupied slot on level L >= 1, that slot's
// nodes agree with P on digit L and above, so they are re-placed on lower
// levels ("cascade"). Level 1 is where most timers of a busy loop wait (4 ms
// to 4 s at a 1 ms tick), and re-placing its slot node by node touches every
// node, each a cache miss in some coroutine frame: 50,000 sleepers cost ~6 ms
// of a stalled loop at one boundary (measured, W2). So each level-1 slot is
// kept as 64 sub-lists by digit 0 (level1_[slot][digit]), and its cascade
// splices each sub-list whole onto the level-0 slot of that digit: 64 list
// moves, whatever the number of nodes. (Level 0 is empty then, by I2.) A level-0 slot holds one tick, but deadlines are in ns:
// what an advance collects is sorted by (deadline, sequence) before it is
// handed out, which is what makes the order a guarantee rather than an
// accident of list order (lists stay in arming order, so the sort is usually
// skipped as already done).
//
// Invariants (checked with assert in debug builds where cheap):
// I1 Every node in a slot has deadline > last_now and P <= W <= P | (2^48-1):
//    W is clamped to the last tick of P's turn of the top level, so no level
//    index exceeds 7 and no slot wraps around. A clamped node is re-placed,
//    not fired, when its slot comes up early (see collect() in the .cpp).
// I2 A node on level L agrees with P on every digit above L, and its digit L
//    is > P's (L >= 1) or >= P's (L = 0). Hence occupied slots of a level all
//    lie ahead of P, every level-L slot ends before any level-(L+1) slot
//    starts, and the earliest occupied slot is the lowest set bit of the
//    lowest non-empty level's bitmap.
// I3 Bit s of occupied_[L] is set exactly when slot (L, s) is non-empty; for
//    level 1, bit d of level1_sub_[s] exactly when sub-list (s, d) is.
// I4 pending_ holds nodes armed with deadline <= last_now since the last
//    advance; expired_ holds the batch an advance is handing out, sorted by
//    (deadline, sequence). Nodes in either count as armed and can be removed.
// I5 level0_min_[s] <= the smallest deadline in level-0 slot s (it may be
//    stale-low after a remove). It only lets collect() skip walking the slot
//    of the tick the clock is inside when nothing there can be due yet.
#pragma once

#include <array>
#include <bit>
#include <cassert>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

#include <weft/detail/timer.hpp>

namespace weft::detail {

namespace wheel {

// 64 slots per level so that one std::uint64_t per level is the occupancy
// bitmap and "the next occupied slot" is a count-trailing-zeros.
inline constexpr unsigned slot_bits = 6;
inline constexpr unsigned slots = 1u << slot_bits;
inline constexpr std::uint64_t slot_mask = slots - 1;

// 8 levels = 48 bits of ticks: 8,900 years at the default 1 ms tick, 89 years
// at a 10 us tick, ~3.3 days at a 1 ns tick (7 levels: 1.4 years at 10 us).
// The span bounds nothing a user sees: a later deadline is clamped to it and
// re-placed as time catches up, so even duration::max() waits exactly.
inline constexpr unsigned levels = 8;
inline constexpr unsigned tick_bits = slot_bits * levels;
inline constexpr std::uint64_t turn_mask = (std::uint64_t{1} << tick_bits) - 1;

// Level of a node at tick `when` seen from position `pos`: the 6-bit digit
// group holding the highest bit in which they differ. OR-ing in slot_mask
// makes a difference confined to digit 0 (or none at all) level 0.
// Pre: pos <= when <= turn_end(pos).
constexpr unsigned level_for(std::uint64_t pos, std::uint64_t when) noexcept {
  const std::uint64_t differing = (pos ^ when) | slot_mask;
  return static_cast<unsigned>((63 - std::countl_zero(differing)) / slot_bits);
}

// Slot of tick `when` on `level`: its digit on that level.
constexpr unsigned slot_for(std::uint64_t when, unsigned level) noexcept {
  return static_cast<unsigned>((when >> (level * slot_bits)) & slot_mask);
}

// First tick of slot `slot` on `level`, in the turn of that level that holds
// `pos` (by I2 there is no other candidate turn).
constexpr std::uint64_t slot_start(std::uint64_t pos, unsigned level, unsigned slot) noexcept {
  const unsigned above = (level + 1) * slot_bits;  // <= 48, so the shifts are defined
  return (pos >> above << above) | (std::uint64_t{slot} << (level * slot_bits));
}

// Last tick of the top level's turn that holds `pos`; the clamp of I1.
constexpr std::uint64_t turn_end(std::uint64_t pos) noexcept { return pos | turn_mask; }

}  // namespace wheel

class timer_wheel;

// timer_link and timer_node live in <weft/detail/timer.hpp>: awaitables in
// public headers embed nodes.


class timer_wheel {
 public:
  // tick: width of a level-0 slot (runtime_options::timer_tick), > 0.
  // now_ns: the time the wheel starts at; it is the origin of the tick grid.
  explicit timer_wheel(std::chrono::nanoseconds tick, std::int64_t now_ns);
  // Disarms the nodes still armed, so their owners may outlive the wheel.
  ~timer_wheel();
  timer_wheel(const timer_wheel&) = delete;  // slot heads are pointed at by nodes
  timer_wheel& operator=(const timer_wheel&) = delete;

  // Arms n for deadline_ns (re-arms it if armed: it moves and takes a new
  // place in arming order). A deadline <= the last advanced time is due at the
  // next advance. Post: n->armed(), n->deadline == deadline_ns.
  void insert(timer_node* n, std::int64_t deadline_ns) noexcept;

  // Disarms n; a no-op if it is not armed. Post: !n->armed(), and n will not
  // be handed out (also when it sits in the batch an advance is handing out).
  void remove(timer_node* n) noexcept;

  // When to wake up next: nullopt when nothing is armed, else a time no later
  // than the earliest armed deadline rounded up to its tick boundary. It is
  // <= now() exactly when something is due already (the next advance hands
  // it out whatever the time); otherwise it is the next tick boundary where an
  // advance fires or cascades a slot, so a loop that sleeps until it wakes at
  // most once per level before a timer fires, and at most one tick late.
  // Costs one bitmap scan per level, never a list walk.
  std::optional<std::int64_t> next_expiry() const noexcept;
  // Finer than next_expiry() when the earliest slot is on level 0: the
  // smallest deadline in it as far as the wheel knows (I5's level0_min_,
  // which may be stale-low; waking early is harmless), never earlier than the
  // slot's own span. Lets a loop wake near a deadline inside a tick instead
  // of at the tick's end. Elsewhere it equals next_expiry().
  std::optional<std::int64_t> next_deadline_hint() const noexcept;

  // Moves time to now_ns (an earlier time counts as now()) and hands every
  // node with deadline <= now_ns to on_expired(timer_node*), disarmed first,
  // in (deadline, sequence) order. on_expired may insert and remove any node,
  // the one it was given included; nodes it arms are never handed out by this
  // call, but by a later advance once due (so a due one by the very next).
  // If on_expired throws, the rest of the batch stays armed and comes first
  // at the next advance. Not reentrant: on_expired must not call advance.
  template <class F>
  void advance(std::int64_t now_ns, F&& on_expired);

  std::size_t size() const noexcept { return count_; }
  bool empty() const noexcept { return count_ == 0; }
  std::int64_t now() const noexcept { return last_now_; }  // the last advanced time
  std::chrono::nanoseconds tick() const noexcept {
    return std::chrono::nanoseconds(static_cast<std::int64_t>(tick_));
  }

 private:
  static timer_node* as_node(timer_link* l) noexcept { return static_cast<timer_node*>(l); }
  static bool before(const timer_node* a, const timer_node* b) noexcept {
    return a->deadline < b->deadline || (a->deadline == b->deadline && a->seq_ < b->seq_);
  }
  static void init_head(timer_link& head) noexcept { head.prev = head.next = &head; }
  static bool list_empty(const timer_link& head) noexcept { return head.next == &head; }
  static void link_back(timer_link& head, timer_link* n) noexcept {
    n->prev = head.prev;
    n->next = &head;
    head.prev->next = n;
    head.prev = n;
  }

  std::uint64_t tick_of(std::int64_t deadline_ns) const noexcept;  // W of I1, clamped
  void place(timer_node* n) noexcept;                              // into its slot, by I1/I2
  void emptied(timer_link* head) noexcept;                         // a list just became empty
  void collect(std::int64_t now_ns) noexcept;                      // fills expired_
  void sort_expired() noexcept;
  std::int64_t time_of(std::uint64_t ticks) const noexcept;  // origin + ticks*tick, saturated

  std::uint64_t tick_;        // ns per tick, > 0
  std::int64_t origin_;       // the time of tick 0
  std::int64_t last_now_;     // the last advanced time; >= origin_, never decreases
  std::uint64_t pos_ = 1;     // P of the header comment
  std::uint64_t seq_ = 0;     // the last arm sequence handed out
  std::size_t count_ = 0;     // armed nodes, wherever they are
  std::int64_t pending_min_ = std::numeric_limits<std::int64_t>::max();  // <= min deadline in pending_
  std::array<std::uint64_t, wheel::levels> occupied_{};
  std::array<std::int64_t, wheel::slots> level0_min_;
  timer_link slots_[wheel::levels][wheel::slots];  // level 1's row unused: see level1_
  timer_link level1_[wheel::slots][wheel::slots];  // [slot][digit 0 of W]
  std::array<std::uint64_t, wheel::slots> level1_sub_{};
  std::int64_t level1_min_[wheel::slots][wheel::slots];
  timer_link pending_;
  timer_link expired_;
};

inline std::uint64_t timer_wheel::tick_of(std::int64_t deadline_ns) const noexcept {
  assert(deadline_ns > last_now_);
  // Unsigned, because deadline - origin may exceed INT64_MAX; it is positive
  // since deadline > last_now >= origin.
  const std::uint64_t since = static_cast<std::uint64_t>(deadline_ns) - static_cast<std::uint64_t>(origin_);
  const std::uint64_t w = since / tick_ + (since % tick_ != 0);
  assert(w >= pos_);
  const std::uint64_t end = wheel::turn_end(pos_);
  return w < end ? w : end;
}

inline void timer_wheel::place(timer_node* n) noexcept {
  const std::uint64_t w = tick_of(n->deadline);
  const unsigned level = wheel::level_for(pos_, w);
  assert(level < wheel::levels);
  const unsigned slot = wheel::slot_for(w, level);
  occupied_[level] |= std::uint64_t{1} << slot;
  if (level == 1) {
    const unsigned digit = wheel::slot_for(w, 0);
    link_back(level1_[slot][digit], n);
    level1_sub_[slot] |= std::uint64_t{1} << digit;
    if (n->deadline < level1_min_[slot][digit]) level1_min_[slot][digit] = n->deadline;
    return;
  }
  link_back(slots_[level][slot], n);
  if (level == 0 && n->deadline < level0_min_[slot]) level0_min_[slot] = n->deadline;
}

inline void timer_wheel::insert(timer_node* n, std::int64_t deadline_ns) noexcept {
  assert(n != nullptr);
  if (n->armed()) remove(n);
  n->deadline = deadline_ns;
  n->seq_ = ++seq_;
  ++count_;
  if (deadline_ns <= last_now_) {
    link_back(pending_, n);
    if (deadline_ns < pending_min_) pending_min_ = deadline_ns;
    return;
  }
  place(n);
}

inline void timer_wheel::remove(timer_node* n) noexcept {
  if (!n->armed()) return;
  timer_link* const prev = n->prev;
  timer_link* const next = n->next;
  prev->next = next;
  next->prev = prev;
  n->prev = n->next = nullptr;
  assert(count_ > 0);
  --count_;
  // In a circular list, the neighbours coincide after an unlink only when the
  // list is down to its head. The head's address then says which list it was,
  // so a node need not carry its level and slot to keep I3.
  if (prev == next) emptied(prev);
}

inline void timer_wheel::emptied(timer_link* head) noexcept {
  const auto at = reinterpret_cast<std::uintptr_t>(head);
  const auto base = reinterpret_cast<std::uintptr_t>(&slots_[0][0]);
  if (at - base < sizeof(slots_)) {  // unsigned: also false below base
    const std::size_t index = (at - base) / sizeof(timer_link);
    occupied_[index / wheel::slots] &= ~(std::uint64_t{1} << (index % wheel::slots));
    if (index < wheel::slots) level0_min_[index] = std::numeric_limits<std::int64_t>::max();
  } else if (const auto base1 = reinterpret_cast<std::uintptr_t>(&level1_[0][0]); at - base1 < sizeof(level1_)) {
    const std::size_t index = (at - base1) / sizeof(timer_link);
    const std::size_t slot = index / wheel::slots, digit = index % wheel::slots;
    level1_min_[slot][digit] = std::numeric_limits<std::int64_t>::max();
    level1_sub_[slot] &= ~(std::uint64_t{1} << digit);
    if (level1_sub_[slot] == 0) occupied_[1] &= ~(std::uint64_t{1} << slot);
  } else if (head == &pending_) {
    pending_min_ = std::numeric_limits<std::int64_t>::max();
  }
}

template <class F>
void timer_wheel::advance(std::int64_t now_ns, F&& on_expired) {
  collect(now_ns);
  // Pop one node at a time rather than detaching the batch: on_expired may
  // remove a node that is still waiting here, and remove() must find it.
  while (!list_empty(expired_)) {
    timer_node* const n = as_node(expired_.next);
    remove(n);
    on_expired(n);
  }
}

}  // namespace weft::detail
