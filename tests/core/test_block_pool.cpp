// tests/core/test_block_pool.cpp — the per-thread small-block pool behind frames,
// contexts and join cells: blocks come back to the thread that made them,
// outlive that thread safely, never overlap, and large requests bypass it.
// (Under AddressSanitizer the pool is plain operator new, so these tests then
// check only that the interface holds; the TSan build runs the pool itself.)
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <unistd.h>

#include <weft/detail/block_pool.hpp>
#include <weft/join_handle.hpp>
#include <weft/runtime.hpp>
#include <weft/task.hpp>

#include "stop_probe.hpp"
#include "support.hpp"

using weft::detail::pool_allocate;
using weft::detail::pool_deallocate;
using weft::detail::pool_mapped_bytes;
using weft::detail::pool_release_free_chunks;
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

// ---- giving memory back -------------------------------------------------------

#if !defined(__SANITIZE_ADDRESS__)  // the pool itself; under ASan it is operator new

namespace {

constexpr std::size_t chunk = std::size_t{256} << 10;  // lib/core/block_pool.cpp's chunk_bytes

// Runs f on a fresh thread, so it starts with an empty heap.
template <class F>
void on_fresh_thread(F f) {
  std::thread(f).join();
}

}  // namespace

TEST_CASE("chunks whose blocks are all free again leave the pool, but for a few spares") {
  on_fresh_thread([] {
    std::vector<stamped> blocks;
    for (int i = 0; i < 100'000; ++i) blocks.push_back(make_block(64, static_cast<unsigned char>(i)));
    const std::size_t peak = pool_mapped_bytes();
    CHECK(peak >= 100'000 * 64);
    for (auto& b : blocks) pool_deallocate(b.p, b.bytes);
    CHECK(pool_release_free_chunks() >= peak - 2 * chunk);  // all but the bump's chunk (and a tail)
    CHECK(pool_mapped_bytes() <= 5 * chunk);                // the bump's chunk and four spares
    // The spares and the unthreaded lists serve the next burst intact.
    blocks.clear();
    for (int i = 0; i < 100'000; ++i) blocks.push_back(make_block(16 + (i % 30) * 16, static_cast<unsigned char>(i)));
    bool all_intact = true;
    for (auto& b : blocks) all_intact = all_intact && intact(b);
    CHECK(all_intact);
    for (auto& b : blocks) pool_deallocate(b.p, b.bytes);
  });
}

TEST_CASE("a chunk holding one live block stays, and so does the block") {
  on_fresh_thread([] {
    std::vector<stamped> blocks;
    for (int i = 0; i < 20'000; ++i) blocks.push_back(make_block(128, static_cast<unsigned char>(i)));
    // Keep every 500th block (128 B each: at least one in every 256 KiB chunk).
    std::vector<stamped> kept;
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      if (i % 500 == 0) kept.push_back(blocks[i]);
      else pool_deallocate(blocks[i].p, blocks[i].bytes);
    }
    const std::size_t before = pool_mapped_bytes();
    CHECK(pool_release_free_chunks() == 0);
    CHECK(pool_mapped_bytes() == before);
    for (auto& b : kept) CHECK(intact(b));
    for (auto& b : kept) pool_deallocate(b.p, b.bytes);
    CHECK(pool_release_free_chunks() > 0);
  });
}

TEST_CASE("blocks another thread freed count as free once handed back, and not before") {
  on_fresh_thread([] {
    // 40,010 blocks: the freer hands them back in batches of 32, so the last
    // ten it frees (the first allocated, in the oldest chunk) stay in its
    // batch until it exits.
    std::vector<stamped> blocks;
    for (int i = 0; i < 40'010; ++i) blocks.push_back(make_block(48, static_cast<unsigned char>(i)));
    std::mutex m;
    std::condition_variable cv;
    int step = 0;
    std::thread freer([&] {
      for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) pool_deallocate(b->p, b->bytes);
      std::unique_lock l(m);
      step = 1;
      cv.notify_all();
      cv.wait(l, [&] { return step == 2; });
    });
    {
      std::unique_lock l(m);
      cv.wait(l, [&] { return step == 1; });
    }
    CHECK(pool_release_free_chunks() > 0);  // the chunks whose blocks all came back
    {
      std::lock_guard l(m);
      step = 2;
      cv.notify_all();
    }
    freer.join();                               // its exit hands the last ten back
    CHECK(pool_release_free_chunks() == chunk);  // and only now their chunk goes
  });
}

#endif

namespace {

// The process's resident set, from /proc/self/statm.
std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t total = 0, resident = 0;
  statm >> total >> resident;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

TEST_CASE("repeated spawn/join bursts on eight loops keep memory near one burst's, not eight") {
  // block_on roots land on successive loops, and each burst's frames and
  // join cells come from the root's loop: unless loops give back what a
  // burst left free, the process grows toward eight bursts' peak.
  constexpr int tasks = test::sanitized ? 100'000 : 500'000;
  weft::runtime rt(test::loops(8));
  // The handles' vector is made once, here: a 4 MiB vector freed on a loop
  // thread stays in glibc's arena of that thread (its mmap threshold grows
  // after the first such free), which would measure glibc, not weft.
  std::vector<weft::join_handle<std::uint64_t>> hs;
  hs.reserve(tasks);
  auto burst = [](std::vector<weft::join_handle<std::uint64_t>>& handles) -> weft::task<std::uint64_t> {
    auto child = [](std::uint64_t i) -> weft::task<std::uint64_t> { co_return i; };
    for (int i = 0; i < tasks; ++i) handles.push_back(weft::spawn(child(static_cast<std::uint64_t>(i))));
    std::uint64_t sum = 0;
    for (auto& h : handles) sum += co_await h;
    handles.clear();
    co_return sum;
  };
  const std::uint64_t expected = std::uint64_t{tasks} * (tasks - 1) / 2;
  std::size_t after_two = 0;
  for (int round = 1; round <= 16; ++round) {
    REQUIRE(rt.block_on(burst(hs)) == expected);
    if (round == 2) after_two = resident_bytes();
  }
  // Idle loops give their bursts' memory back within a sweep's pacing; poll
  // rather than guess how long that takes on a loaded machine.
  const std::size_t bound = after_two * 13 / 10;
  std::size_t after_sixteen = resident_bytes();
  // Under the sanitizers the resident set is mostly their own shadow and
  // metadata, which they keep for memory weft unmapped (and under ASan the
  // pool is operator new): the bursts still run (the sweeps race the other
  // loops' frees under TSan), the bound is not checked.
  if (!test::sanitized) {
    const bool within = test::eventually([&] { return (after_sixteen = resident_bytes()) <= bound; });
    CHECK_MESSAGE(within, "the loops kept what their bursts freed");
  }
  MESSAGE("resident after 2 bursts ", after_two >> 20, " MiB, after 16 ", after_sixteen >> 20, " MiB");
}
