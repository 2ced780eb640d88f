// lib/core/block_pool.cpp — the per-thread small-block pool of detail/block_pool.hpp.
//
// Layout. A heap (one per thread that allocates) carves blocks out of chunks
// of chunk_bytes, each aligned to chunk_bytes, whose first 16 bytes name the
// owning heap; so the owner of any pooled block is `p & ~(chunk_bytes - 1)`
// and blocks carry no header. Class k holds blocks of (k + 1) * 16 bytes.
//
// Ownership. Only the owner thread touches its free lists and bump pointer.
// Another thread frees a block by pushing it on the owner's `remote` stack of
// its class, in chains of up to remote_batch blocks; the owner takes a whole
// stack with one exchange when that free list runs dry, so there is no ABA.
//
// Lifetime. Blocks can outlive their thread (a join cell kept after the
// runtime is gone). Every free by another thread subtracts the block's bytes
// from `balance`; when the owner thread exits it retires the heap: it marks
// every remote stack `retired` (later frees leave the block where it is) and
// adds its own count of bytes out (`net_out`: handed out less freed locally)
// to `balance`, which then counts the bytes still out. Whichever side brings
// it to zero frees the heap and its chunks. Before the owner's add the count
// can only be zero or negative, so nobody frees a live thread's heap. Counting
// bytes rather than blocks makes `net_out + balance` what the heap hands out
// now, which paces the sweeps below.
//
// Giving memory back. Free lists keep what a burst freed, so a heap stays at
// its peak; with one heap per loop and bursts landing on successive loops
// (block_on roots), a process would grow toward loops x one burst. A loop
// therefore calls pool_scavenge from time to time: when the heap's free
// memory is large (free_floor and a quarter of what it maps), a sweep counts
// the free bytes of each chunk by walking the free lists (after adopting the
// remote stacks); a chunk whose free bytes equal what was ever carved from it
// holds no live block, so its blocks are unthreaded from the lists and the
// chunk is kept as a spare (up to spare_max, reused before mapping anew) or
// unmapped. A block still on its way back (in another thread's batch, or
// pushed after the sweep adopted the stack) counts as live, so its chunk
// stays. The walk costs about what allocating those blocks did, and it is
// paced (a look every 10 ms; a sweep only of memory that stayed free from
// one look to the next; a sweep that found little is not repeated until
// there is more to find), so a busy heap does not pay for it.
#include <weft/detail/block_pool.hpp>
#include <weft/detail/thread_state.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <new>
#include <utility>

namespace weft::detail {

#if defined(__SANITIZE_ADDRESS__)
#define WEFT_POOL_DISABLED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WEFT_POOL_DISABLED 1
#endif
#endif

#ifdef WEFT_POOL_DISABLED

void* pool_allocate(std::size_t bytes) { return ::operator new(bytes); }
void pool_deallocate(void* p, std::size_t) noexcept { ::operator delete(p); }
void pool_flush() noexcept {}
std::int64_t pool_scavenge(std::int64_t) noexcept { return INT64_MAX; }
std::size_t pool_release_free_chunks() noexcept { return 0; }
std::size_t pool_mapped_bytes() noexcept { return 0; }
thread_state::~thread_state() = default;

#else

namespace {

constexpr std::size_t granule = 16;
constexpr std::size_t class_count = pooled_max / granule;
// 256 KiB: big enough that mapping a chunk is rare (one per ~5,000 48-byte
// join cells), small enough that a thread that allocates a few frames keeps
// little.
constexpr std::size_t chunk_bytes = std::size_t{256} << 10;
// Blocks a thread frees for another thread's heap before it hands them back
// as one chain (block_heap::outgoing): the hand-back is a CAS on a line the
// owner also writes, so per block it cost more than the rest of a spawn
// (measured in W1). Held back at most: this many per class, until the batch
// fills, the thread frees for another heap, its loop goes to sleep, or it exits.
constexpr std::int64_t remote_batch = 32;

struct free_block {
  free_block* next;
};

struct chunk_header {
  block_heap* owner;
  chunk_header* next;
  std::uint32_t carved;      // bytes handed out of it by the bump pointer, set when the bump leaves it
  std::uint32_t free_bytes;  // a sweep's count of its free blocks' bytes (the owner's scratch)
  std::uint64_t pad;
};
static_assert(sizeof(chunk_header) % granule == 0, "blocks after the header stay 16-byte aligned");
constexpr std::uint32_t chunk_payload = static_cast<std::uint32_t>(chunk_bytes - sizeof(chunk_header));

// Sweeps start when the free memory a heap holds is at least this, and at
// least a quarter of what it maps: below that the walk is not worth it.
constexpr std::int64_t free_floor = std::int64_t{4} << 20;
// Empty chunks a heap keeps for its next burst rather than unmapping (1 MiB).
constexpr std::size_t spare_max = 4;
// How often a heap looks (pool_scavenge). It sweeps only memory that stays
// free: when its free memory moved by less than a sixteenth of a sweep's
// worth since the last look. A heap still being freed (a burst being joined,
// W3's cancel phase) would walk lists whose chunks still hold live blocks
// (the join cells live until their handles go), again and again.
constexpr std::int64_t sweep_interval_ns = 10'000'000;
// A sweep that freed under half of the free memory it saw (it lies in chunks
// that still hold live blocks) is not repeated until the free memory has
// grown by another sweep's worth, or this has passed: a fragmented heap is
// not walked again and again.
constexpr std::int64_t retry_ns = 5'000'000'000;

chunk_header* chunk_of(void* p) noexcept {
  return reinterpret_cast<chunk_header*>(reinterpret_cast<std::uintptr_t>(p) & ~(chunk_bytes - 1));
}

// A zero-byte request gets the smallest class, like any other small one.
constexpr std::size_t class_of(std::size_t bytes) noexcept { return bytes == 0 ? 0 : (bytes + granule - 1) / granule - 1; }
constexpr std::size_t class_bytes(std::size_t cls) noexcept { return (cls + 1) * granule; }

}  // namespace

struct block_heap {
  static constexpr std::uintptr_t retired = 1;

  free_block* local[class_count] = {};
  char* bump = nullptr;
  char* bump_end = nullptr;
  chunk_header* chunks = nullptr;  // every chunk in use; the first is the bump's
  chunk_header* spares = nullptr;  // empty chunks kept by a sweep, reused first
  std::size_t chunk_count = 0;     // in `chunks`
  std::size_t spare_count = 0;
  // Blocks this thread freed for other heaps, one batch per class, handed to
  // their owner as one chain (owner only).
  struct outgoing_batch {
    block_heap* to = nullptr;
    free_block* head = nullptr;
    free_block* tail = nullptr;
    std::int64_t count = 0;
  };
  outgoing_batch outgoing[class_count];
  // Bytes handed out less bytes freed on this thread (owner only).
  std::int64_t net_out = 0;
  // Pacing of pool_scavenge (owner only).
  std::int64_t next_look_ns = 0;
  std::int64_t looked_free = -1;  // free_estimate() at the last look
  std::int64_t futile_free = 0;  // free memory left by the last futile sweep (0: none)
  std::int64_t futile_until = 0;
  // Per class, a stack of free_block* pushed by other threads; the low bit
  // is `retired`. Per class so that the owner can adopt a whole stack as its
  // free list in O(1) instead of walking it (each block of it is likely a
  // cache miss: the other core wrote it last).
  alignas(64) std::atomic<std::uintptr_t> remote[class_count] = {};
  // Minus the bytes of every block freed by another thread; at retirement
  // the owner adds net_out, so from then on it counts the bytes still out.
  // On a line of its own: remote freers write it, the owner reads it.
  alignas(64) std::atomic<std::int64_t> balance{0};

  ~block_heap() {
    unmap_all(chunks);
    unmap_all(spares);
  }

  void add_chunk() {
    if (chunk_header* c = chunks) c->carved = static_cast<std::uint32_t>(bump - reinterpret_cast<char*>(c + 1));
    chunk_header* c = spares;
    if (c != nullptr) {
      spares = c->next;
      --spare_count;
    } else {
      c = map_chunk();
      c->owner = this;
    }
    c->next = chunks;
    chunks = c;
    ++chunk_count;
    bump = reinterpret_cast<char*>(c + 1);
    bump_end = reinterpret_cast<char*>(c) + chunk_bytes;
  }

  void* allocate(std::size_t cls) {
    if (local[cls] == nullptr && remote[cls].load(std::memory_order_relaxed) != 0)
      // acquire: pairs with the givers' release, so their writes to the
      // blocks (and to the objects that lived there) happen before reuse.
      local[cls] = reinterpret_cast<free_block*>(remote[cls].exchange(0, std::memory_order_acquire));
    const std::size_t bytes = class_bytes(cls);
    if (free_block* b = local[cls]) {
      local[cls] = b->next;
      // The next allocation of this class will write there; start the
      // (likely cross-core) fetch now.
      __builtin_prefetch(b->next, 1);
      net_out += static_cast<std::int64_t>(bytes);
      return b;
    }
    if (static_cast<std::size_t>(bump_end - bump) < bytes) add_chunk();  // the tail (< 512 B) is left unused
    void* p = bump;
    bump += bytes;
    net_out += static_cast<std::int64_t>(bytes);
    return p;
  }

  void free_local(void* p, std::size_t cls) noexcept {
    auto* b = static_cast<free_block*>(p);
    b->next = local[cls];
    local[cls] = b;
    net_out -= static_cast<std::int64_t>(class_bytes(cls));
  }

  // Frees p, a block of `owner`'s, from this (another) thread: batched.
  void free_for(block_heap* owner, void* p, std::size_t cls) noexcept {
    outgoing_batch& o = outgoing[cls];
    if (o.to != owner) {
      flush(o, cls);
      o.to = owner;
    }
    auto* b = static_cast<free_block*>(p);
    b->next = o.head;
    o.head = b;
    if (o.tail == nullptr) o.tail = b;
    if (++o.count == remote_batch) flush(o, cls);
  }

  void flush_outgoing() noexcept {
    for (std::size_t c = 0; c < class_count; ++c) flush(outgoing[c], c);
  }

  // Hands a chain of `count` blocks back to their owner. Any thread but the owner's.
  static void give_back(block_heap* owner, free_block* head, free_block* tail, std::int64_t count,
                        std::size_t cls) noexcept {
    std::atomic<std::uintptr_t>& stack = owner->remote[cls];
    std::uintptr_t top = stack.load(std::memory_order_relaxed);
    while (!(top & retired)) {  // once retired, the blocks just stay where they are until the heap goes
      tail->next = reinterpret_cast<free_block*>(top);
      // release: the blocks' contents (and our last use of them) before the owner reuses them.
      if (stack.compare_exchange_weak(top, reinterpret_cast<std::uintptr_t>(head), std::memory_order_release,
                                      std::memory_order_relaxed))
        break;
    }
    // acq_rel: the last one out must see every other party's use of the heap
    // before it frees it. Before the owner retires the count is <= 0, so this
    // cannot free a heap whose owner still runs.
    const std::int64_t bytes = count * static_cast<std::int64_t>(class_bytes(cls));
    if (owner->balance.fetch_sub(bytes, std::memory_order_acq_rel) == bytes) delete owner;
  }

  // The owner thread is exiting: hand back what it holds for others, stop
  // pushes here, and let the count of blocks still out decide who frees it.
  void retire() noexcept {
    flush_outgoing();
    // relaxed: nothing on the stacks is read; what orders the heap's end is `balance`.
    for (auto& stack : remote) stack.store(retired, std::memory_order_relaxed);
    // Read before the add: from the add on, a remote free may free the heap.
    const std::int64_t out = net_out;
    if (balance.fetch_add(out, std::memory_order_acq_rel) + out == 0) delete this;
  }

  // What the chunks in use can hold (spares aside).
  std::int64_t payload() const noexcept { return static_cast<std::int64_t>(chunk_count * chunk_payload); }

  // Free memory the heap holds: what its chunks have carved, less what is
  // out (relaxed: an estimate that only paces sweeps).
  std::int64_t free_estimate() const noexcept {
    return payload() - (bump_end - bump) - (net_out + balance.load(std::memory_order_relaxed));
  }

  // The sweep of the header comment: returns the bytes of chunks that left
  // the heap's use (kept as spares or unmapped). Owner only.
  std::size_t release_free_chunks() noexcept {
    if (chunks == nullptr) return 0;
    chunks->carved = static_cast<std::uint32_t>(bump - reinterpret_cast<char*>(chunks + 1));
    for (chunk_header* c = chunks; c != nullptr; c = c->next) c->free_bytes = 0;
    for (std::size_t cls = 0; cls < class_count; ++cls) {
      if (remote[cls].load(std::memory_order_relaxed) != 0) {
        // acquire: as in allocate.
        auto* got = reinterpret_cast<free_block*>(remote[cls].exchange(0, std::memory_order_acquire));
        local[cls] = append(got, local[cls]);
      }
      const auto bytes = static_cast<std::uint32_t>(class_bytes(cls));
      for (free_block* b = local[cls]; b != nullptr; b = b->next) chunk_of(b)->free_bytes += bytes;
    }
    // The bump's chunk stays (it is where the next blocks come from); so
    // does any chunk with a live block in it.
    auto empty = [&](const chunk_header* c) { return c != chunks && c->free_bytes == c->carved; };
    std::size_t released = 0;
    for (chunk_header* c = chunks->next; c != nullptr; c = c->next)
      if (empty(c)) released += chunk_bytes;
    if (released == 0) return 0;
    for (std::size_t cls = 0; cls < class_count; ++cls) {
      free_block** link = &local[cls];
      while (free_block* b = *link) {
        if (empty(chunk_of(b))) *link = b->next;
        else link = &b->next;
      }
    }
    chunk_header** link = &chunks->next;
    while (chunk_header* c = *link) {
      if (!empty(c)) {
        link = &c->next;
        continue;
      }
      *link = c->next;
      --chunk_count;
      if (spare_count < spare_max) {
        c->next = spares;
        spares = c;
        ++spare_count;
      } else {
        ::munmap(c, chunk_bytes);
      }
    }
    return released;
  }

 private:
  static chunk_header* map_chunk() {
    // Map twice the size and trim, to get chunk_bytes alignment.
    void* raw = ::mmap(nullptr, 2 * chunk_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    auto begin = reinterpret_cast<std::uintptr_t>(raw);
    auto aligned = (begin + chunk_bytes - 1) & ~(chunk_bytes - 1);
    if (aligned > begin) ::munmap(raw, aligned - begin);
    if (auto tail = begin + 2 * chunk_bytes - (aligned + chunk_bytes))
      ::munmap(reinterpret_cast<void*>(aligned + chunk_bytes), tail);
#ifdef MADV_POPULATE_WRITE
    // Fault the chunk in with one call rather than one trap per page: ~30%
    // less time per page here, and a spawn burst touches every page anyway.
    // Kernels before 5.14 refuse, and the pages fault in one by one.
    ::madvise(reinterpret_cast<void*>(aligned), chunk_bytes, MADV_POPULATE_WRITE);
#endif
    return reinterpret_cast<chunk_header*>(aligned);
  }

  static void unmap_all(chunk_header* c) noexcept {
    while (c != nullptr) {
      chunk_header* next = c->next;
      ::munmap(c, chunk_bytes);
      c = next;
    }
  }

  // `front` followed by `back`; walks `front`.
  static free_block* append(free_block* front, free_block* back) noexcept {
    if (front == nullptr) return back;
    free_block* t = front;
    while (t->next != nullptr) t = t->next;
    t->next = back;
    return front;
  }

  static void flush(outgoing_batch& o, std::size_t cls) noexcept {
    if (o.count == 0) return;
    give_back(o.to, o.head, o.tail, o.count, cls);
    o = outgoing_batch{};
  }
};

namespace {

// A thread whose heap is already retired (it allocates from a thread_local
// destructor that runs after ours) gets a heap of its own per block, retired
// at once: the block's free then releases it.
void* allocate_after_exit(std::size_t cls) {
  auto* h = new block_heap;
  void* p = h->allocate(cls);
  h->retire();
  return p;
}

// This thread's heap, made on first use; null once the thread is exiting.
block_heap* my_heap() {
  thread_state& ts = this_thread();
  if (ts.heap == nullptr && !ts.heap_retired) ts.heap = new block_heap;
  return ts.heap;
}

}  // namespace

thread_state::~thread_state() {
  if (heap != nullptr) std::exchange(heap, nullptr)->retire();
  heap_retired = true;
}

void pool_flush() noexcept {
  if (block_heap* h = this_thread().heap) h->flush_outgoing();
}

std::int64_t pool_scavenge(std::int64_t now_ns) noexcept {
  constexpr std::int64_t never = INT64_MAX;
  block_heap* h = this_thread().heap;
  if (h == nullptr) return never;
  const std::int64_t free = h->free_estimate();
  const std::int64_t worth = std::max(free_floor, h->payload() / 4);
  if (free < worth) return never;
  // Not worth waking an idle loop for: its free memory lies in chunks that
  // still hold live blocks, and what frees them will find the loop busy.
  if (h->futile_free != 0 && free < h->futile_free + worth && now_ns < h->futile_until) return never;
  if (now_ns < h->next_look_ns) return h->next_look_ns;
  h->next_look_ns = now_ns + sweep_interval_ns;
  const std::int64_t moved = free - std::exchange(h->looked_free, free);
  if (moved > worth / 16 || moved < -worth / 16) return h->next_look_ns;  // still changing: look again
  const auto released = static_cast<std::int64_t>(h->release_free_chunks());
  h->futile_free = released * 2 >= free ? 0 : free - released;
  h->futile_until = now_ns + retry_ns;
  return h->futile_free != 0 ? never : h->next_look_ns;
}

std::size_t pool_release_free_chunks() noexcept {
  block_heap* h = this_thread().heap;
  return h != nullptr ? h->release_free_chunks() : 0;
}

std::size_t pool_mapped_bytes() noexcept {
  block_heap* h = this_thread().heap;
  return h != nullptr ? (h->chunk_count + h->spare_count) * chunk_bytes : 0;
}

void* pool_allocate(std::size_t bytes) {
  if (bytes > pooled_max) return ::operator new(bytes);
  const std::size_t cls = class_of(bytes);
  block_heap* h = my_heap();
  return h != nullptr ? h->allocate(cls) : allocate_after_exit(cls);
}

void pool_deallocate(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
  if (bytes > pooled_max) {
    ::operator delete(p);  // plain: clang 14 has no sized delete unless asked (-fsized-deallocation)
    return;
  }
  const std::size_t cls = class_of(bytes);
  block_heap* owner = chunk_of(p)->owner;
  block_heap* mine = nullptr;
  try {
    mine = my_heap();  // a thread that only frees batches too
  } catch (const std::bad_alloc&) {
    // No heap to batch in: the block goes back on its own.
  }
  if (owner == mine) owner->free_local(p, cls);
  else if (mine != nullptr) mine->free_for(owner, p, cls);
  else block_heap::give_back(owner, static_cast<free_block*>(p), static_cast<free_block*>(p), 1, cls);
}

#endif

}  // namespace weft::detail
