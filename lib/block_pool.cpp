// lib/block_pool.cpp — the per-thread small-block pool of detail/block_pool.hpp.
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
// runtime is gone). Every free by another thread subtracts one from
// `balance`; when the owner thread exits it retires the heap: it marks every
// remote stack `retired` (later frees leave the block where it is) and adds
// its own count of blocks out (`net_out`: handed out less freed locally) to
// `balance`, which then counts the blocks still out. Whichever side brings it
// to zero frees the heap and its chunks. Before the owner's add the count can
// only be zero or negative, so nobody frees a live thread's heap.
#include <weft/detail/block_pool.hpp>
#include <weft/detail/context.hpp>

#include <sys/mman.h>

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
};
static_assert(sizeof(chunk_header) == granule, "blocks after the header stay 16-byte aligned");

// A zero-byte request gets the smallest class, like any other small one.
constexpr std::size_t class_of(std::size_t bytes) noexcept { return bytes == 0 ? 0 : (bytes + granule - 1) / granule - 1; }
constexpr std::size_t class_bytes(std::size_t cls) noexcept { return (cls + 1) * granule; }

}  // namespace

struct block_heap {
  static constexpr std::uintptr_t retired = 1;

  free_block* local[class_count] = {};
  char* bump = nullptr;
  char* bump_end = nullptr;
  chunk_header* chunks = nullptr;
  // Blocks this thread freed for other heaps, one batch per class, handed to
  // their owner as one chain (owner only).
  struct outgoing_batch {
    block_heap* to = nullptr;
    free_block* head = nullptr;
    free_block* tail = nullptr;
    std::int64_t count = 0;
  };
  outgoing_batch outgoing[class_count];
  // Blocks handed out less blocks freed on this thread (owner only).
  std::int64_t net_out = 0;
  // Per class, a stack of free_block* pushed by other threads; the low bit
  // is `retired`. Per class so that the owner can adopt a whole stack as its
  // free list in O(1) instead of walking it (each block of it is likely a
  // cache miss: the other core wrote it last).
  alignas(64) std::atomic<std::uintptr_t> remote[class_count] = {};
  // Minus one for every block freed by another thread; at retirement the
  // owner adds net_out, so from then on it counts the blocks still out. On a
  // line of its own: remote freers write it, the owner reads it once.
  alignas(64) std::atomic<std::int64_t> balance{0};

  ~block_heap() {
    while (chunks != nullptr) {
      chunk_header* c = chunks;
      chunks = c->next;
      ::munmap(c, chunk_bytes);
    }
  }

  void add_chunk() {
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
    auto* c = reinterpret_cast<chunk_header*>(aligned);
    c->owner = this;
    c->next = chunks;
    chunks = c;
    bump = reinterpret_cast<char*>(c + 1);
    bump_end = reinterpret_cast<char*>(aligned + chunk_bytes);
  }

  void* allocate(std::size_t cls) {
    if (local[cls] == nullptr && remote[cls].load(std::memory_order_relaxed) != 0)
      // acquire: pairs with the givers' release, so their writes to the
      // blocks (and to the objects that lived there) happen before reuse.
      local[cls] = reinterpret_cast<free_block*>(remote[cls].exchange(0, std::memory_order_acquire));
    if (free_block* b = local[cls]) {
      local[cls] = b->next;
      // The next allocation of this class will write there; start the
      // (likely cross-core) fetch now.
      __builtin_prefetch(b->next, 1);
      ++net_out;
      return b;
    }
    const std::size_t bytes = class_bytes(cls);
    if (static_cast<std::size_t>(bump_end - bump) < bytes) add_chunk();  // the tail (< 512 B) is left unused
    void* p = bump;
    bump += bytes;
    ++net_out;
    return p;
  }

  void free_local(void* p, std::size_t cls) noexcept {
    auto* b = static_cast<free_block*>(p);
    b->next = local[cls];
    local[cls] = b;
    --net_out;
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
    if (owner->balance.fetch_sub(count, std::memory_order_acq_rel) == count) delete owner;
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

 private:
  static void flush(outgoing_batch& o, std::size_t cls) noexcept {
    if (o.count == 0) return;
    give_back(o.to, o.head, o.tail, o.count, cls);
    o = outgoing_batch{};
  }
};

namespace {

block_heap* owner_of(void* p) noexcept {
  return reinterpret_cast<chunk_header*>(reinterpret_cast<std::uintptr_t>(p) & ~(chunk_bytes - 1))->owner;
}

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
  block_heap* owner = owner_of(p);
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
