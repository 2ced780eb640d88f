// tests/counted.hpp — a lifetime counter, to prove that frames and captured
// objects are constructed and destroyed exactly as often as each other.
#pragma once

#include <atomic>

struct counted {
  static inline std::atomic<int> made{0}, gone{0};
  static void reset() {
    made = 0;
    gone = 0;
  }
  static int alive() { return made - gone; }
  static int constructions() { return made; }
  static int destructions() { return gone; }

  int id = 0;
  counted() : id(++made) {}
  counted(const counted& o) : id(o.id) { ++made; }
  counted(counted&& o) noexcept : id(o.id) { ++made; }
  counted& operator=(const counted&) = default;
  ~counted() { ++gone; }
};
