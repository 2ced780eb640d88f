// weft/detail/block_pool.hpp — where coroutine frames and per-task state come from.
//
// A spawn-heavy program allocates and frees millions of small blocks (frames,
// join cells, contexts), usually on one loop and freed on another. The general
// allocator serves that badly (glibc takes an arena lock per cross-thread free
// and consolidates its fast bins whenever the heap grows), so weft keeps a
// per-thread pool of small blocks (lib/core/block_pool.cpp):
//  * sizes up to pooled_max bytes, in 16-byte classes, no header per block;
//  * a block freed on the thread that allocated it goes on that thread's free
//    list; one freed elsewhere goes back to its owner, in batches, through a
//    lock-free list the owner takes when its own list runs dry;
//  * whole chunks the pool no longer uses go back to the OS when a loop calls
//    pool_scavenge, so a burst's memory does not stay with the loop that
//    spawned it;
//  * anything larger, and every block under AddressSanitizer (so use-after-free
//    stays visible there), is plain operator new.
// Every deallocation must pass the size the allocation asked for.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::detail {

inline constexpr std::size_t pooled_max = 512;

void* pool_allocate(std::size_t bytes);
void pool_deallocate(void* p, std::size_t bytes) noexcept;
// Hands back at once the blocks this thread freed for other threads and still
// holds in its batches (a loop calls it before it sleeps).
void pool_flush() noexcept;
// Gives back whole chunks this thread's pool holds free (kept as a few spares
// or unmapped), when it holds a lot of free memory; paced by `now_ns` (a
// steady-clock reading), so a loop may call it every turn. Returns when to
// call again if there is still something worth a sweep (a loop about to
// sleep wakes for it), else INT64_MAX.
std::int64_t pool_scavenge(std::int64_t now_ns) noexcept;
// The sweep itself, unpaced: the bytes of chunks that left use (tests).
std::size_t pool_release_free_chunks() noexcept;
// Bytes of chunks this thread's pool has mapped, spares included (tests).
std::size_t pool_mapped_bytes() noexcept;

// Mixin: `new T` and `delete p` of a class deriving from pooled go through the
// pool. The deleted object's static type must be its dynamic type (a final
// class deleting itself), so the size matches.
struct pooled {
  static void* operator new(std::size_t bytes) { return pool_allocate(bytes); }
  static void operator delete(void* p, std::size_t bytes) noexcept { pool_deallocate(p, bytes); }
};

}  // namespace weft::detail
