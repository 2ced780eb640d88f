// tests/time/test_timer_wheel.cpp — the timer wheel on a hand-driven clock.
//
// Covers weft::detail::timer_wheel alone: its level/slot arithmetic at every
// 64^k boundary, the guarantees stated in lib/time/timer_wheel.hpp (never early,
// nothing missed, (deadline, arm order) order, O(1) remove, next_expiry's
// bounds) and the edges that broke other wheels (clock jumps past the top
// level, deadlines near INT64_MAX). Time only moves when a test calls
// advance(), so every expectation is exact; the randomized test compares the
// wheel against a std::multimap keyed by (deadline, arm sequence).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "time/timer_wheel.hpp"
#include "wheel_reference.hpp"

namespace {

using weft::detail::timer_node;
using weft::detail::timer_wheel;
namespace wheel = weft::detail::wheel;
using namespace std::chrono_literals;

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

constexpr std::uint64_t pow64(unsigned k) { return std::uint64_t{1} << (6 * k); }

// Advances w to now and returns the indices (into nodes) of what it handed out.
std::vector<std::size_t> advance(timer_wheel& w, std::vector<timer_node>& nodes, std::int64_t now) {
  std::vector<std::size_t> fired;
  w.advance(now, [&](timer_node* n) {
    REQUIRE_FALSE(n->armed());
    REQUIRE(n->deadline <= w.now());  // w.now() is max(now, the last advanced time)
    fired.push_back(static_cast<std::size_t>(n - nodes.data()));
  });
  return fired;
}

using ids = std::vector<std::size_t>;

// The deadline rounded up to the wheel's tick grid, in 128 bits so that
// near-max deadlines do not wrap.
__extension__ typedef __int128 i128;
i128 round_up(std::int64_t deadline, std::int64_t origin, std::int64_t tick) {
  const i128 since = i128{deadline} - origin;
  const i128 ticks = since <= 0 ? 0 : (since + tick - 1) / tick;
  return i128{origin} + ticks * tick;
}

}  // namespace

TEST_CASE("timer_node stays within 48 bytes, since every sleeping task carries one") {
  static_assert(sizeof(timer_node) <= 48);
  CHECK(sizeof(timer_node) == 48);  // links, deadline, fire, owner loop, sequence
}

TEST_CASE("level_for picks the digit group of the highest differing bit, at every 64^k boundary +-1") {
  CHECK(wheel::level_for(0, 0) == 0);
  CHECK(wheel::level_for(5, 5) == 0);
  for (unsigned k = 1; k < wheel::levels; ++k) {
    const std::uint64_t b = pow64(k);
    CAPTURE(k);
    CHECK(wheel::level_for(0, b - 1) == k - 1);
    CHECK(wheel::level_for(0, b) == k);
    CHECK(wheel::level_for(0, b + 1) == k);
    // One tick before a boundary, the boundary itself is on level k: it must
    // cascade when the position reaches it, not sit in a level-0 slot.
    CHECK(wheel::level_for(b - 1, b) == k);
    CHECK(wheel::level_for(b - 1, b + 1) == k);
    CHECK(wheel::level_for(b, b + 1) == 0);
    CHECK(wheel::level_for(b + 1, 2 * b - 1) == k - 1);
    CHECK(wheel::level_for(b + 1, 2 * b) == k);
  }
  CHECK(wheel::level_for(0, wheel::turn_mask) == wheel::levels - 1);
  CHECK(wheel::level_for(pow64(8), pow64(8) + wheel::turn_mask) == wheel::levels - 1);
}

TEST_CASE("slot_for reads the level's 6-bit digit, at every 64^k boundary +-1") {
  for (unsigned k = 1; k < wheel::levels; ++k) {
    const std::uint64_t b = pow64(k);
    CAPTURE(k);
    CHECK(wheel::slot_for(b - 1, k - 1) == 63);
    CHECK(wheel::slot_for(b - 1, k) == 0);
    CHECK(wheel::slot_for(b, k) == 1);
    CHECK(wheel::slot_for(b, k - 1) == 0);
    CHECK(wheel::slot_for(b + 1, 0) == 1);
    CHECK(wheel::slot_for(b + 1, k) == 1);
    CHECK(wheel::slot_for(b + 1, k - 1) == (k == 1 ? 1u : 0u));
    // A slot starts on its level's boundary, in the position's turn of that level.
    CHECK(wheel::slot_start(b - 1, k, 1) == b);
    CHECK(wheel::slot_start(b + 1, k - 1, 0) == b);
    CHECK(wheel::slot_start(b + 1, 0, 63) == b + 63);
  }
  CHECK(wheel::slot_for(wheel::turn_mask, wheel::levels - 1) == 63);
  CHECK(wheel::turn_end(1) == wheel::turn_mask);
  CHECK(wheel::turn_end(pow64(8) + 5) == pow64(8) + wheel::turn_mask);
}

TEST_CASE("constructing with a non-positive tick throws invalid_argument naming timer_tick") {
  for (auto tick : {0ns, -1ns, std::chrono::nanoseconds(kMin)}) {
    try {
      timer_wheel w(tick, 0);
      FAIL("no exception");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find("timer_tick") != std::string::npos);
    }
  }
}

TEST_CASE("a timer fires at its exact deadline, not at the tick boundary before it") {
  std::vector<timer_node> nodes(1);
  timer_wheel w(1000ns, 0);
  w.insert(&nodes[0], 2500);
  CHECK(w.next_expiry() == 3000);  // rounded up to its tick, never down
  CHECK(advance(w, nodes, 2000).empty());
  CHECK(advance(w, nodes, 2499).empty());
  CHECK(nodes[0].armed());
  CHECK(advance(w, nodes, 2500) == ids{0});
  CHECK(w.empty());
  CHECK(w.next_expiry() == std::nullopt);
}

TEST_CASE("no timer ever fires early and none is missed, over an uneven sweep of the clock") {
  // Deadlines on, next to and between tick and level boundaries, armed in a
  // scrambled order; the clock moves by uneven steps that land mid-tick.
  constexpr std::int64_t tick = 1000;
  std::vector<std::int64_t> deadlines;
  for (unsigned k = 0; k <= 3; ++k)
    for (std::int64_t d : {-1, 0, 1})
      for (std::int64_t off : {-1, 0, 1}) deadlines.push_back((static_cast<std::int64_t>(pow64(k)) + d) * tick + off);
  for (std::int64_t d = 1; d < 70'000'000; d = d * 3 + 17) deadlines.push_back(d);
  std::mt19937_64 rng(7);
  std::shuffle(deadlines.begin(), deadlines.end(), rng);

  std::vector<timer_node> nodes(deadlines.size());
  timer_wheel w(std::chrono::nanoseconds(tick), 0);
  for (std::size_t i = 0; i < nodes.size(); ++i) w.insert(&nodes[i], deadlines[i]);

  std::int64_t now = 0;
  std::size_t fired_total = 0;
  std::int64_t last_deadline = kMin;
  while (!w.empty()) {
    now += 1 + static_cast<std::int64_t>(rng() % (3 * tick));
    if (rng() % 8 == 0) now += static_cast<std::int64_t>(rng() % 2'000'000);
    for (std::size_t i : advance(w, nodes, now)) {
      CHECK(nodes[i].deadline <= now);            // never early
      CHECK(nodes[i].deadline >= last_deadline);  // in deadline order, across calls too
      last_deadline = nodes[i].deadline;
      ++fired_total;
    }
    for (const timer_node& n : nodes)
      if (n.armed()) REQUIRE(n.deadline > now);  // nothing due is left behind
  }
  CHECK(fired_total == nodes.size());
}

TEST_CASE("a loop sleeping until next_expiry fires each timer at its rounded-up deadline, waking once per level at most") {
  constexpr std::int64_t tick = 1000, origin = 123;
  std::vector<std::int64_t> deadlines{origin + 1, origin + 999, origin + 1000, origin + 1001};
  for (unsigned k = 1; k < wheel::levels; ++k)
    for (std::int64_t d : {-1, 0, 1})
      deadlines.push_back(origin + (static_cast<std::int64_t>(pow64(k)) + d) * tick + (k % 2 ? 0 : 17));
  for (std::int64_t d : deadlines) {
    CAPTURE(d);
    std::vector<timer_node> nodes(1);
    timer_wheel w(std::chrono::nanoseconds(tick), origin);
    w.insert(&nodes[0], d);
    unsigned wakes = 0;
    ids fired;
    while (fired.empty()) {
      const auto next = w.next_expiry();
      REQUIRE(next.has_value());
      REQUIRE(*next <= round_up(d, origin, tick));
      REQUIRE(*next > w.now());  // nothing due yet, so it must not ask for a wake-up now
      fired = advance(w, nodes, *next);
      ++wakes;
    }
    CHECK(w.now() == round_up(d, origin, tick));
    CHECK(wakes <= wheel::levels);
  }
}

TEST_CASE("equal deadlines fire in arming order within one level-0 slot") {
  std::vector<timer_node> nodes(6);
  timer_wheel w(1ms, 0);
  for (std::size_t i : {3, 0, 5, 1, 4, 2}) w.insert(&nodes[i], 5'000'000);
  CHECK(advance(w, nodes, 5'000'000) == ids{3, 0, 5, 1, 4, 2});
}

TEST_CASE("equal deadlines fire in arming order after a cascade from level 1") {
  // tick 1 ns, so ticks and ns coincide; position starts at 1.
  std::vector<timer_node> nodes(6);
  timer_wheel w(1ns, 0);
  w.insert(&nodes[0], 200);          // level 1, slot 3 (200 = 3*64 + 8)
  CHECK(advance(w, nodes, 150).empty());
  w.insert(&nodes[1], 200);          // still level 1, behind node 0
  w.insert(&nodes[4], 201);
  CHECK(advance(w, nodes, 191).empty());  // position 192: slot 3 cascades to level 0
  w.insert(&nodes[2], 200);          // straight into level 0
  w.insert(&nodes[5], 199);
  w.insert(&nodes[3], 200);
  CHECK(advance(w, nodes, 199) == ids{5});
  CHECK(advance(w, nodes, 201) == ids{0, 1, 2, 3, 4});
}

TEST_CASE("a level-1 slot cascades whole sub-lists: each node lands on its tick, in (deadline, arming) order") {
  // tick 1 ns; level-1 slot 3 holds ticks 192..255. Shuffled deadlines, some
  // equal, some removed before the cascade.
  std::vector<timer_node> nodes(2000);
  timer_wheel w(1ns, 0);
  std::mt19937 gen(7);
  std::uniform_int_distribution<std::int64_t> in_slot(193, 255);
  std::multimap<std::pair<std::int64_t, std::size_t>, std::size_t> expected;
  for (std::size_t i = 0; i < nodes.size(); ++i) w.insert(&nodes[i], in_slot(gen));
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (i % 7 == 3) w.remove(&nodes[i]);
    else expected.emplace(std::pair{nodes[i].deadline, i}, i);
  }
  CHECK(w.next_expiry() == 192);  // the cascade is the next thing to do
  CHECK(advance(w, nodes, 191).empty());
  CHECK(w.size() == expected.size());
  // After the splice, level 0 knows its earliest deadline exactly.
  const std::int64_t first = expected.begin()->first.first;
  CHECK(w.next_expiry() == first);
  CHECK(w.next_deadline_hint() == first);
  ids fired;
  for (std::int64_t t = 192; t <= 255; ++t) {
    for (std::size_t id : advance(w, nodes, t)) {
      CHECK(nodes[id].deadline == t);
      fired.push_back(id);
    }
  }
  ids want;
  for (auto& [key, id] : expected) want.push_back(id);
  CHECK(fired == want);
  CHECK(w.empty());
}

TEST_CASE("a level-1 slot stays occupied until the last of its sub-lists empties") {
  std::vector<timer_node> nodes(2);
  timer_wheel w(1ns, 0);
  w.insert(&nodes[0], 200);  // level 1, slot 3, digit 8
  w.insert(&nodes[1], 250);  // level 1, slot 3, digit 58
  w.remove(&nodes[0]);
  CHECK(w.next_expiry() == 192);
  w.insert(&nodes[0], 300);  // level 1, slot 4
  w.remove(&nodes[1]);
  CHECK(w.next_expiry() == 256);
  w.remove(&nodes[0]);
  CHECK(w.next_expiry() == std::nullopt);
}

TEST_CASE("equal deadlines fire in arming order after a cascade from level 2") {
  constexpr std::int64_t d = 3 * 4096 + 5 * 64 + 7;  // digits (3, 5, 7)
  std::vector<timer_node> nodes(8);
  timer_wheel w(1ns, 0);
  w.insert(&nodes[0], d);      // level 2
  w.insert(&nodes[1], d);
  w.insert(&nodes[6], d + 1);  // same level-2 slot, later deadline
  CHECK(advance(w, nodes, 3 * 4096 - 1).empty());  // cascades level-2 slot 3 to level 1
  w.insert(&nodes[2], d);      // level 1, behind the cascaded two
  w.insert(&nodes[7], d - 1);
  CHECK(advance(w, nodes, 3 * 4096 + 5 * 64 - 1).empty());  // cascades to level 0
  w.insert(&nodes[3], d);
  w.insert(&nodes[4], d);
  w.insert(&nodes[5], d);
  CHECK(advance(w, nodes, d - 1) == ids{7});
  CHECK(advance(w, nodes, d) == ids{0, 1, 2, 3, 4, 5});
  CHECK(advance(w, nodes, d + 1) == ids{6});
}

TEST_CASE("one advance over many slots and levels hands out in (deadline, arming) order") {
  std::vector<timer_node> nodes(12);
  timer_wheel w(1000ns, 0);
  const std::int64_t dl[] = {5'000'000, 70, 5'000'000, 64'000, 64'001, 1'500, 63'999, 70, 1'000, 4'096'000, 999, 64'000};
  for (std::size_t i = 0; i < nodes.size(); ++i) w.insert(&nodes[i], dl[i]);
  CHECK(advance(w, nodes, 10'000'000) == ids{1, 7, 10, 8, 5, 6, 3, 11, 4, 9, 0, 2});
}

TEST_CASE("a deadline exactly on a level boundary (64^k ticks) fires on time") {
  for (std::int64_t tick : {1, 1000}) {
    for (std::int64_t origin : {0, 12345}) {
      for (unsigned k = 1; k < wheel::levels; ++k) {
        CAPTURE(tick);
        CAPTURE(origin);
        CAPTURE(k);
        const std::int64_t b = static_cast<std::int64_t>(pow64(k)) * tick;
        std::vector<timer_node> nodes(3);
        timer_wheel w(std::chrono::nanoseconds(tick), origin);
        w.insert(&nodes[0], origin + b);
        // Stop short of the boundary in a few steps so the upper levels cascade.
        CHECK(advance(w, nodes, origin + b / 2).empty());
        CHECK(advance(w, nodes, origin + b - b / 64).empty());
        // Armed one tick before the boundary, the same deadline lands on level k.
        CHECK(advance(w, nodes, origin + b - tick).empty());
        w.insert(&nodes[1], origin + b);
        w.insert(&nodes[2], origin + b + 1);
        CHECK(advance(w, nodes, origin + b - 1).empty());
        CHECK(advance(w, nodes, origin + b) == ids{0, 1});
        CHECK(advance(w, nodes, origin + b + 1) == ids{2});
      }
    }
  }
}

TEST_CASE("a deadline already past is due at the next advance, even if the clock has not moved") {
  std::vector<timer_node> nodes(5);
  timer_wheel w(1000ns, 0);
  CHECK(advance(w, nodes, 5000).empty());
  w.insert(&nodes[0], 4999);
  w.insert(&nodes[1], 5000);  // equal to the last advanced time counts as past
  w.insert(&nodes[2], 0);
  w.insert(&nodes[3], kMin);
  w.insert(&nodes[4], -7);
  const auto next = w.next_expiry();
  REQUIRE(next.has_value());
  CHECK(*next <= kMin);  // due now, so a loop does not sleep
  CHECK(advance(w, nodes, 5000) == ids{3, 4, 2, 0, 1});
}

TEST_CASE("an advance to an earlier time counts as the last advanced time") {
  std::vector<timer_node> nodes(2);
  timer_wheel w(1000ns, 0);
  CHECK(advance(w, nodes, 10'000).empty());
  w.insert(&nodes[0], 10'500);
  w.insert(&nodes[1], 9'000);
  CHECK(advance(w, nodes, 3'000) == ids{1});
  CHECK(w.now() == 10'000);
  CHECK(advance(w, nodes, 10'500) == ids{0});
}

TEST_CASE("removed timers never fire, and removing an unarmed node is a no-op") {
  std::mt19937_64 rng(3);
  std::vector<timer_node> nodes(3000), never(1);
  timer_wheel w(1000ns, 0);
  for (auto& n : nodes) w.insert(&n, static_cast<std::int64_t>(rng() % 5'000'000'000));
  w.remove(&never[0]);
  CHECK(w.size() == nodes.size());
  for (std::size_t i = 0; i < nodes.size(); i += 3) {
    w.remove(&nodes[i]);
    w.remove(&nodes[i]);  // twice is fine
    CHECK_FALSE(nodes[i].armed());
  }
  CHECK(w.size() == nodes.size() - nodes.size() / 3);
  std::int64_t now = 0;
  std::size_t fired = 0;
  while (!w.empty()) {
    now += 50'000'000;
    for (std::size_t i : advance(w, nodes, now)) {
      CHECK(i % 3 != 0);
      ++fired;
    }
  }
  CHECK(fired == nodes.size() - nodes.size() / 3);
}

TEST_CASE("removing the last node of a slot clears its bit, so next_expiry moves to the next slot") {
  std::vector<timer_node> nodes(4);
  timer_wheel w(1000ns, 0);
  w.insert(&nodes[0], 3000);       // level 0
  w.insert(&nodes[1], 3000);
  w.insert(&nodes[2], 200'000);    // level 1, slot 3 starts at 192 ticks
  w.insert(&nodes[3], 5'000'000);  // level 2
  CHECK(w.next_expiry() == 3000);
  w.remove(&nodes[1]);
  CHECK(w.next_expiry() == 3000);
  w.remove(&nodes[0]);
  CHECK(w.next_expiry() == 192'000);
  w.remove(&nodes[2]);
  CHECK(w.next_expiry() == 4'096'000);
  w.remove(&nodes[3]);
  CHECK(w.next_expiry() == std::nullopt);
}

TEST_CASE("remove is O(1): emptying a 200k-node slot from its far end stays linear") {
  // A remove that searched its slot's list would make this loop quadratic
  // (2*10^10 steps); unlinking makes it 200k steps.
  std::vector<timer_node> nodes(200'000);
  timer_wheel w(1ms, 0);
  for (auto& n : nodes) w.insert(&n, 30'000'000'000);
  for (std::size_t i = nodes.size(); i-- > 0;) w.remove(&nodes[i]);
  CHECK(w.empty());
  CHECK(w.next_expiry() == std::nullopt);
}

TEST_CASE("next_expiry is nullopt when empty, never later than the earliest deadline rounded up, and due-now only when something is due") {
  constexpr std::int64_t tick = 1000, origin = -777;
  std::mt19937_64 rng(11);
  std::vector<timer_node> nodes(64);
  timer_wheel w(std::chrono::nanoseconds(tick), origin);
  CHECK(w.next_expiry() == std::nullopt);
  std::int64_t now = origin;
  for (int round = 0; round < 400; ++round) {
    timer_node& n = nodes[rng() % nodes.size()];
    if (rng() % 3 == 0) {
      w.remove(&n);
    } else {
      const unsigned bits = rng() % 36;  // its own statement: operands of % are unsequenced
      w.insert(&n, now + static_cast<std::int64_t>(rng() % (std::uint64_t{1} << bits)) - 500);
    }
    if (rng() % 4 == 0) {
      now += static_cast<std::int64_t>(rng() % 100'000);
      advance(w, nodes, now);
    }
    std::optional<std::int64_t> earliest;
    for (const auto& m : nodes)
      if (m.armed() && (!earliest || m.deadline < *earliest)) earliest = m.deadline;
    const auto next = w.next_expiry();
    REQUIRE(next.has_value() == earliest.has_value());
    if (!earliest) continue;
    const i128 bound = *earliest <= w.now() ? i128{*earliest} : round_up(*earliest, origin, tick);
    CHECK(i128{*next} <= bound);
    CHECK((*next <= w.now()) == (*earliest <= w.now()));  // "due now" exactly when something is
  }
}

TEST_CASE("a clock jump past the top level's span still fires short timers armed after it (tokio PR #8334)") {
  // At a 1 ns tick the top level's turn is 2^48 ns (~3.3 days).
  const std::int64_t turn = static_cast<std::int64_t>(pow64(wheel::levels));
  std::vector<timer_node> nodes(12);
  timer_wheel w(1ns, 0);
  w.insert(&nodes[0], turn / 2);
  w.insert(&nodes[1], kMax);
  const std::int64_t jump = 3 * turn + 12345;
  CHECK(advance(w, nodes, jump) == ids{0});
  CHECK(nodes[1].armed());
  const std::int64_t offsets[] = {1, 2, 63, 64, 65, 4095, 4096, 4097, 262'144, 1'000'000};
  for (std::size_t i = 0; i < std::size(offsets); ++i) w.insert(&nodes[2 + i], jump + offsets[i]);
  std::size_t next_index = 2;
  while (next_index < 2 + std::size(offsets)) {
    const auto next = w.next_expiry();
    REQUIRE(next.has_value());
    for (std::size_t i : advance(w, nodes, *next)) {
      CHECK(i == next_index);
      CHECK(nodes[i].deadline == *next);  // tick 1 ns: on time to the ns
      ++next_index;
    }
  }
  CHECK(w.size() == 1);
}

TEST_CASE("a clock jump of two top-level turns (~178 years) at a 10 us tick still fires short timers after it") {
  std::vector<timer_node> nodes(3);
  timer_wheel w(10us, 0);
  w.insert(&nodes[0], 10'000'000);
  const std::int64_t jump = 2 * static_cast<std::int64_t>(pow64(wheel::levels)) * 10'000 + 7;
  CHECK(advance(w, nodes, jump) == ids{0});
  w.insert(&nodes[1], jump + 1);
  w.insert(&nodes[2], jump + 5'000'000);
  CHECK(w.next_expiry() <= jump + 10'000);
  CHECK(advance(w, nodes, jump + 1) == ids{1});
  CHECK(advance(w, nodes, jump + 4'999'999).empty());
  CHECK(advance(w, nodes, jump + 5'000'000) == ids{2});
}

TEST_CASE("timers straddling the end of the top level's turn fire on time") {
  // Deadlines past the turn's last tick are clamped to it, then re-placed when
  // it comes up; they must neither fire there early nor be lost.
  const std::int64_t end = static_cast<std::int64_t>(wheel::turn_mask);  // last tick of turn 0
  std::vector<timer_node> nodes(7);
  timer_wheel w(1ns, 0);
  CHECK(advance(w, nodes, end - 3).empty());
  const std::int64_t dl[] = {end - 1, end, end + 1, end + 2, end + 65, end + 4097, end + 3 * (end + 1)};
  for (std::size_t i = 0; i < nodes.size(); ++i) w.insert(&nodes[i], dl[i]);
  std::size_t expected = 0;
  while (!w.empty()) {
    const auto next = w.next_expiry();
    REQUIRE(next.has_value());
    for (std::size_t i : advance(w, nodes, *next)) {
      CHECK(i == expected);
      CHECK(nodes[i].deadline == *next);
      ++expected;
    }
  }
  CHECK(expected == nodes.size());
}

TEST_CASE("near-maximum deadlines saturate: clamped, never wrapped, never early, and fire when reached") {
  constexpr std::int64_t tick = 10'000, origin = 3'600'000'000'000;  // 10 us tick: the turn is ~89 years
  const std::int64_t turn = static_cast<std::int64_t>(pow64(wheel::levels)) * tick;
  std::vector<timer_node> nodes(5);
  timer_wheel w(std::chrono::nanoseconds(tick), origin);
  const std::int64_t dl[] = {origin + turn - 1, origin + turn, origin + turn + 1, kMax - 1, kMax};
  for (std::size_t i = 0; i < nodes.size(); ++i) w.insert(&nodes[i], dl[i]);
  const auto first = w.next_expiry();
  REQUIRE(first.has_value());
  CHECK(*first > origin);  // not wrapped into the past
  CHECK(*first <= origin + turn);
  for (std::int64_t t : {origin + turn / 3, origin + turn - tick, origin + turn - 2}) CHECK(advance(w, nodes, t).empty());
  CHECK(w.size() == 5);
  CHECK(advance(w, nodes, origin + turn - 1) == ids{0});
  CHECK(advance(w, nodes, origin + turn) == ids{1});
  CHECK(advance(w, nodes, origin + turn + 1) == ids{2});
  CHECK(advance(w, nodes, kMax - 2).empty());
  CHECK(advance(w, nodes, kMax - 1) == ids{3});
  CHECK(advance(w, nodes, kMax) == ids{4});
}

TEST_CASE("next_expiry saturates at INT64_MAX instead of wrapping when the rounded-up deadline overflows") {
  constexpr std::int64_t hour = 3'600'000'000'000;
  const std::int64_t origin = kMax - 10 * hour - 5;
  std::vector<timer_node> nodes(1);
  timer_wheel w(std::chrono::nanoseconds(hour), origin);
  w.insert(&nodes[0], kMax);
  CHECK(w.next_expiry() == kMax);
  CHECK(advance(w, nodes, kMax - 1).empty());
  CHECK(advance(w, nodes, kMax) == ids{0});
}

TEST_CASE("next_expiry near INT64_MAX with a negative origin is exact, not saturated (found by fuzz_timer_wheel)") {
  // ticks * tick exceeds INT64_MAX here while origin + ticks * tick does not.
  constexpr std::int64_t tick = 1'000'000, origin = -5'000'000'007;
  const std::int64_t d = kMax - 1'000'000'000;
  std::vector<timer_node> nodes(1);
  timer_wheel w(std::chrono::nanoseconds(tick), origin);
  CHECK(advance(w, nodes, d - 10 * tick).empty());
  w.insert(&nodes[0], d);
  CHECK(i128{*w.next_expiry()} == round_up(d, origin, tick));
  CHECK(*w.next_expiry() < kMax);
  CHECK(advance(w, nodes, d) == ids{0});
}

TEST_CASE("re-inserting a node from inside on_expired re-arms it, as a periodic timer does") {
  std::vector<timer_node> nodes(1);
  timer_wheel w(100ns, 0);
  w.insert(&nodes[0], 1000);
  std::vector<std::int64_t> fired_at;
  for (std::int64_t now = 250; now <= 10'000; now += 250) {
    w.advance(now, [&](timer_node* n) {
      CHECK(n->deadline == now);  // steps of 250 land exactly on each period
      fired_at.push_back(n->deadline);
      w.insert(n, n->deadline + 1000);
    });
  }
  CHECK(fired_at == std::vector<std::int64_t>{1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000});
  CHECK(nodes[0].armed());
  w.remove(&nodes[0]);
}

TEST_CASE("a due node armed from inside on_expired fires at the next advance, not this one, and is never lost") {
  std::vector<timer_node> nodes(3);
  timer_wheel w(1000ns, 0);
  w.insert(&nodes[0], 5000);
  ids first;
  w.advance(5000, [&](timer_node* n) {
    first.push_back(static_cast<std::size_t>(n - nodes.data()));
    if (n == &nodes[0]) {
      w.insert(&nodes[0], 4000);  // itself, overdue
      w.insert(&nodes[1], 5000);  // another, due now
      w.insert(&nodes[2], 5001);  // in the tick now is inside
    }
  });
  CHECK(first == ids{0});
  CHECK(w.size() == 3);
  CHECK(w.next_expiry() <= 5000);
  CHECK(advance(w, nodes, 5000) == ids{0, 1});
  CHECK(advance(w, nodes, 5001) == ids{2});
}

TEST_CASE("on_expired may remove a node due later in the same batch, and it never fires") {
  std::vector<timer_node> nodes(3);
  timer_wheel w(1000ns, 0);
  w.insert(&nodes[0], 100);
  w.insert(&nodes[1], 200'000);
  w.insert(&nodes[2], 3'000'000);
  ids fired;
  w.advance(10'000'000, [&](timer_node* n) {
    fired.push_back(static_cast<std::size_t>(n - nodes.data()));
    if (n == &nodes[0]) w.remove(&nodes[2]);
  });
  CHECK(fired == ids{0, 1});
  CHECK_FALSE(nodes[2].armed());
  CHECK(w.empty());
}

TEST_CASE("an exception from on_expired leaves the rest of the batch armed, first in line at the next advance") {
  std::vector<timer_node> nodes(4);
  timer_wheel w(1000ns, 0);
  for (std::size_t i = 0; i < 3; ++i) w.insert(&nodes[i], 1000 * static_cast<std::int64_t>(i + 1));
  CHECK_THROWS_AS(w.advance(5000, [&](timer_node* n) {
    if (n == &nodes[0]) throw std::runtime_error("boom");
  }),
                  std::runtime_error);
  CHECK_FALSE(nodes[0].armed());
  CHECK(nodes[1].armed());
  CHECK(w.size() == 2);
  CHECK(w.next_expiry() == 2000);
  w.insert(&nodes[3], 4500);
  CHECK(advance(w, nodes, 5000) == ids{1, 2, 3});
}

TEST_CASE("re-arming an armed node moves it and gives it a new place in arming order") {
  std::vector<timer_node> nodes(3);
  timer_wheel w(1000ns, 0);
  w.insert(&nodes[0], 100'000);
  w.insert(&nodes[1], 100'000);
  w.insert(&nodes[0], 100'000);
  w.insert(&nodes[2], 9'000'000);
  w.insert(&nodes[2], 50'000);
  CHECK(w.size() == 3);
  CHECK(advance(w, nodes, 100'000) == ids{2, 1, 0});
}

TEST_CASE("size counts armed nodes wherever they wait: slots, overdue, or the batch being handed out") {
  std::vector<timer_node> nodes(4);
  timer_wheel w(1000ns, 0);
  CHECK(advance(w, nodes, 1000).empty());
  w.insert(&nodes[0], 500);         // overdue
  w.insert(&nodes[1], 2000);        // level 0
  w.insert(&nodes[2], 10'000'000);  // level 2
  CHECK(w.size() == 3);
  std::vector<std::size_t> seen;
  w.advance(3000, [&](timer_node*) { seen.push_back(w.size()); });
  CHECK(seen == std::vector<std::size_t>{2, 1});  // the node handed out no longer counts
  CHECK(w.size() == 1);
}

TEST_CASE("copying a node copies deadline and fire but never its arming") {
  std::vector<timer_node> nodes(1);
  timer_wheel w(1000ns, 0);
  nodes[0].fire = [](timer_node*) noexcept {};
  w.insert(&nodes[0], 7000);
  timer_node copy(nodes[0]);
  CHECK_FALSE(copy.armed());
  CHECK(copy.deadline == 7000);
  CHECK(static_cast<bool>(copy.fire == nodes[0].fire));
  CHECK(w.size() == 1);
  w.remove(&nodes[0]);
}

TEST_CASE("destroying the wheel disarms the nodes still armed") {
  std::vector<timer_node> nodes(4);
  {
    timer_wheel w(1000ns, 0);
    w.insert(&nodes[0], -5);          // overdue
    w.insert(&nodes[1], 2000);        // level 0
    w.insert(&nodes[2], 10'000'000);  // level 2
    w.insert(&nodes[3], kMax);        // clamped
  }
  for (const auto& n : nodes) CHECK_FALSE(n.armed());
}

// ---------------------------------------------------------------------------
// Randomized differential test: the wheel against a multimap keyed by
// (deadline, arm sequence), which is the specification written as a container.

namespace {


std::int64_t sat_add(std::int64_t a, i128 b) {
  const i128 r = i128{a} + b;
  return r > kMax ? kMax : r < kMin ? kMin : static_cast<std::int64_t>(r);
}

void run_differential(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::int64_t ticks[] = {1, 7, 1000, 10'000, 1'000'000};
  const std::int64_t origins[] = {0, -5'000'000'007, 3'600'000'000'000, static_cast<std::int64_t>(rng() >> 4)};
  const std::int64_t tick = ticks[seed % std::size(ticks)];
  const std::int64_t origin = origins[(seed / 5) % std::size(origins)];
  CAPTURE(seed);
  CAPTURE(tick);
  CAPTURE(origin);
  auto below = [&](std::uint64_t n) { return static_cast<std::int64_t>(rng() % n); };

  constexpr std::size_t kNodes = 160;
  std::vector<timer_node> nodes(kNodes);
  wheel_reference ref(kNodes);
  timer_wheel w(std::chrono::nanoseconds(tick), origin);
  std::int64_t now = origin;

  auto tick_boundary = [&](unsigned k) {  // a grid point 64^k ticks ahead, or the next aligned one
    const i128 since = (i128{now} - origin) / tick;
    const i128 step = i128{1} << (6 * k);
    const i128 t = rng() % 2 ? since + step : (since / step + 1) * step;
    return sat_add(origin, t * tick);
  };
  // Each rng() call is its own statement: the order in which function
  // arguments are evaluated is unspecified, and a seed must replay alike
  // under every compiler and sanitizer.
  auto near_boundary = [&](std::int64_t unit) {
    const std::int64_t at = tick_boundary(1 + rng() % 8);
    return sat_add(at, (below(3) - 1) * unit);
  };
  auto deadline = [&]() -> std::int64_t {
    switch (rng() % 9) {
      case 0: return 0;
      case 1: return sat_add(now, -below(std::uint64_t{1} << (rng() % 40)));
      case 2: return now;
      case 3:
      case 4: return near_boundary(1);
      case 5: return near_boundary(tick);
      case 6:
        return rng() % 2 ? kMax - below(3 * static_cast<std::uint64_t>(tick))
                         : sat_add(origin, (i128{1} << 48) * tick + below(3) - 1);
      default: return sat_add(now, below(std::uint64_t{1} << (1 + rng() % 50)));
    }
  };
  auto later = [&]() -> std::int64_t {
    switch (rng() % 10) {
      case 0: return now;
      case 1: return sat_add(now, 1);
      case 2:
      case 3: return sat_add(now, below(3 * static_cast<std::uint64_t>(tick)));
      case 4:
      case 5: {
        const auto next = w.next_expiry();  // what a loop would sleep until
        return next ? std::max(*next, now) : now;
      }
      case 6: return near_boundary(1);
      case 7: return rng() % 8 == 0 ? sat_add(now, (i128{1} << 48) * tick * (1 + below(3))) : now;
      case 8: return sat_add(now, -below(10'000));  // an earlier time counts as now
      default: return sat_add(now, below(std::uint64_t{1} << (rng() % 40)));
    }
  };

  for (int op = 0; op < 15000; ++op) {
    const std::size_t i = rng() % kNodes;
    const unsigned what = rng() % 10;
    if (what < 5) {
      const std::int64_t d = deadline();
      w.insert(&nodes[i], d);
      ref.insert(i, d);
    } else if (what < 7) {
      w.remove(&nodes[i]);
      ref.remove(i);
    } else {
      const std::int64_t target = std::max(later(), now);
      const std::uint64_t boundary = ref.seq;
      w.advance(target, [&](timer_node* n) {
        const std::size_t got = static_cast<std::size_t>(n - nodes.data());
        const auto want = ref.next_due(target, boundary);
        REQUIRE(want.has_value());
        REQUIRE(got == *want);
        ref.remove(got);
        switch (rng() % 8) {
          case 0:
          case 1: {  // re-arm itself, possibly already due
            const std::int64_t d = deadline();
            w.insert(n, d);
            ref.insert(got, d);
            break;
          }
          case 2: {
            const std::size_t j = rng() % kNodes;
            w.remove(&nodes[j]);
            ref.remove(j);
            break;
          }
          case 3: {
            const std::size_t j = rng() % kNodes;
            const std::int64_t d = deadline();
            w.insert(&nodes[j], d);
            ref.insert(j, d);
            break;
          }
          default: break;
        }
      });
      now = target;
      REQUIRE_FALSE(ref.next_due(now, boundary).has_value());  // nothing due was left behind
    }

    REQUIRE(w.size() == ref.armed.size());
    const auto next = w.next_expiry();
    REQUIRE(next.has_value() == !ref.armed.empty());
    if (next) {
      const std::int64_t earliest = ref.armed.begin()->first.first;
      const i128 bound = earliest <= now ? i128{earliest} : round_up(earliest, origin, tick);
      REQUIRE(i128{*next} <= bound);
      REQUIRE((*next <= now) == (earliest <= now));  // "due now" exactly when something is
    }
    if (op % 64 == 0)
      for (std::size_t j = 0; j < kNodes; ++j) REQUIRE(nodes[j].armed() == ref.where[j].has_value());
  }
  for (auto& n : nodes) w.remove(&n);
}

}  // namespace

TEST_CASE("randomized insert/remove/advance matches a (deadline, sequence) multimap exactly") {
  for (std::uint64_t seed : {0ull, 1ull, 2ull, 3ull, 4ull, 7ull, 11ull, 19ull, 42ull, 12345ull, 0xdeadbeefull})
    run_differential(seed);
}

TEST_CASE("next_deadline_hint is never later than the earliest deadline's tick end, and exact for a lone level-0 timer") {
  constexpr std::int64_t tick = 1000, origin = 0;
  std::vector<timer_node> nodes(64);  // outlives the wheel, which disarms what is left
  timer_wheel w(std::chrono::nanoseconds(tick), origin);
  CHECK(w.next_deadline_hint() == std::nullopt);
  w.insert(&nodes[0], 5'300);  // level 0, inside tick 6
  CHECK(w.next_expiry() == 6'000);
  CHECK(w.next_deadline_hint() == 5'300);  // wake at the deadline, not the tick's end
  w.insert(&nodes[1], 5'100);
  CHECK(w.next_deadline_hint() == 5'100);
  CHECK(advance(w, nodes, 5'150) == ids{1});  // a partial slot fires exactly what is due
  CHECK(w.next_deadline_hint() == 5'300);
  // Randomized: the hint is a valid early wake (<= next_expiry) and never
  // earlier than the earliest slot's span, so waking there is not a spin.
  std::mt19937_64 rng(3);
  std::int64_t now = 6'000;
  advance(w, nodes, now);
  for (int round = 0; round < 2000; ++round) {
    timer_node& n = nodes[rng() % nodes.size()];
    if (rng() % 3 == 0) w.remove(&n);
    else w.insert(&n, now + static_cast<std::int64_t>(rng() % 200'000));
    if (rng() % 4 == 0) advance(w, nodes, now += static_cast<std::int64_t>(rng() % 5'000));
    const auto next = w.next_expiry();
    const auto hint = w.next_deadline_hint();
    REQUIRE(next.has_value() == hint.has_value());
    if (!next) continue;
    CHECK(*hint <= *next);
    if (*next > w.now()) CHECK(*hint > *next - tick);
    std::optional<std::int64_t> earliest;
    for (const auto& m : nodes)
      if (m.armed() && (!earliest || m.deadline < *earliest)) earliest = m.deadline;
    // A hint finer than next_expiry() comes from a level-0 slot: it must not
    // pass the earliest deadline (else the loop would wake late).
    if (*hint < *next) CHECK(*hint <= *earliest);
  }
}
