// tests/wheel_reference.hpp — the timer wheel's specification written as a
// container, shared by the randomized test (test_timer_wheel.cpp) and the
// libFuzzer target (fuzz_timer_wheel.cpp): armed nodes, by index, in a
// multimap keyed by (deadline, arm sequence). What a correct wheel hands out
// next is exactly what this container says is due first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

struct wheel_reference {
  using key = std::pair<std::int64_t, std::uint64_t>;
  std::multimap<key, std::size_t> armed;
  std::vector<std::optional<std::multimap<key, std::size_t>::iterator>> where;
  std::uint64_t seq = 0;

  explicit wheel_reference(std::size_t nodes) : where(nodes) {}
  void insert(std::size_t i, std::int64_t d) {
    remove(i);
    where[i] = armed.emplace(key{d, ++seq}, i);
  }
  void remove(std::size_t i) {
    if (where[i]) armed.erase(*where[i]);
    where[i].reset();
  }
  // The node an advance(now) begun after arm number `boundary` must hand out
  // next: nodes armed from inside that advance wait for the next one.
  std::optional<std::size_t> next_due(std::int64_t now, std::uint64_t boundary) const {
    for (const auto& [k, i] : armed) {
      if (k.first > now) break;
      if (k.second <= boundary) return i;
    }
    return std::nullopt;
  }
};
