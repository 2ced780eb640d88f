// tests/test_block_pool.cpp — the per-thread small-block pool behind frames,
// contexts and join cells: blocks come back to the thread that made them,
// outlive that thread safely, never overlap, and large requests bypass it.
// (Under AddressSanitizer the pool is plain operator new, so these tests then
// check only that the interface holds; the TSan build runs the pool itself.)
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <weft/detail/block_pool.hpp>

using weft::detail::pool_allocate;
using weft::detail::pool_deallocate;
using weft::detail::pooled_max;

namespace {

struct stamped {
  void* p;
  std::size_t bytes;
  unsigned char stamp;
};

stamped make_block(std::size_t bytes, unsigned char stamp) {
  void* p = pool_allocate(bytes);
  std::memset(p, stamp, bytes);
  return {p, bytes, stamp};
}

// True when the block still holds what was written into it: a block handed
// out twice at once would have been overwritten by its other owner.
bool intact(const stamped& b) {
  const auto* c = static_cast<const unsigned char*>(b.p);
  return std::all_of(c, c + b.bytes, [&](unsigned char x) { return x == b.stamp; });
}

}  // namespace

TEST_CASE("pooled blocks of every size up to the largest class are aligned and distinct") {
  std::vector<stamped> blocks;
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17},
                            std::size_t{48}, std::size_t{128}, pooled_max - 1, pooled_max, pooled_max + 1,
                            std::size_t{4096}}) {
    for (int i = 0; i < 100; ++i) {
      auto b = make_block(bytes, static_cast<unsigned char>(blocks.size()));
      CHECK(reinterpret_cast<std::uintptr_t>(b.p) % 16 == 0);
      blocks.push_back(b);
    }
  }
  for (auto& b : blocks) CHECK(intact(b));
  for (auto& b : blocks) pool_deallocate(b.p, b.bytes);
  pool_deallocate(nullptr, 48);  // like operator delete, null is fine
}

TEST_CASE("a block freed on the same thread is reused for the next request of its class") {
  void* a = pool_allocate(40);
  pool_deallocate(a, 40);
  void* b = pool_allocate(48);  // same 48-byte class
  pool_deallocate(b, 48);
#if !defined(__SANITIZE_ADDRESS__)
  CHECK(a == b);
#endif
}

TEST_CASE("a block freed on another thread goes back to the thread that allocated it") {
  // On a fresh thread, so its free list of the class starts empty.
  std::thread owner([] {
    void* a = pool_allocate(96);
    std::thread([a] { pool_deallocate(a, 96); }).join();
    void* b = pool_allocate(96);
#if !defined(__SANITIZE_ADDRESS__)
    CHECK(a == b);
#endif
    pool_deallocate(b, 96);
  });
  owner.join();
}

TEST_CASE("blocks outlive the thread that allocated them and are freed from another") {
  std::vector<stamped> blocks;
  std::thread([&] {
    for (int i = 0; i < 10'000; ++i) blocks.push_back(make_block(16 + (i % 20) * 16, static_cast<unsigned char>(i)));
  }).join();
  // The owner is gone; its heap lives until the last of these is back.
  for (auto& b : blocks) CHECK(intact(b));
  for (auto& b : blocks) pool_deallocate(b.p, b.bytes);
}

TEST_CASE("a thread that allocates from a thread_local destructor after its pool retired still works") {
  struct late {
    std::vector<stamped>* out;
    ~late() { out->push_back(make_block(64, 0x5a)); }
  };
  std::vector<stamped> blocks;
  std::thread([&] {
    // Constructed before the pool's thread state, so destroyed after it.
    static thread_local late l{&blocks};
    (void)l;
    pool_deallocate(pool_allocate(64), 64);
  }).join();
  REQUIRE(blocks.size() == 1);
  CHECK(intact(blocks[0]));
  pool_deallocate(blocks[0].p, blocks[0].bytes);
}

TEST_CASE("stress: blocks passed between threads are never handed out twice") {
  // Each thread allocates stamped blocks, keeps some, and hands the rest to
  // the next thread, which checks and frees them: cross-thread frees racing
  // the owner's own allocations and frees, under TSan in its build.
  constexpr int threads = 4;
  constexpr int rounds = 20'000;
  struct mailbox {
    std::mutex m;
    std::vector<stamped> items;
  };
  std::vector<mailbox> boxes(threads);
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<stamped> mine;
      for (int r = 0; r < rounds; ++r) {
        auto b = make_block(1 + rng() % (pooled_max + 64), static_cast<unsigned char>(rng()));
        if (rng() % 2) {
          std::lock_guard lk(boxes[(t + 1) % threads].m);
          boxes[(t + 1) % threads].items.push_back(b);
        } else {
          mine.push_back(b);
        }
        if (mine.size() > 64) {
          for (auto& x : mine) {
            if (!intact(x)) ++bad;
            pool_deallocate(x.p, x.bytes);
          }
          mine.clear();
        }
        std::vector<stamped> inbox;
        {
          std::lock_guard lk(boxes[t].m);
          inbox.swap(boxes[t].items);
        }
        for (auto& x : inbox) {
          if (!intact(x)) ++bad;
          pool_deallocate(x.p, x.bytes);
        }
      }
      for (auto& x : mine) {
        if (!intact(x)) ++bad;
        pool_deallocate(x.p, x.bytes);
      }
    });
  }
  for (auto& th : ts) th.join();
  for (auto& box : boxes)
    for (auto& x : box.items) {
      if (!intact(x)) ++bad;
      pool_deallocate(x.p, x.bytes);
    }
  CHECK(bad.load() == 0);
}
