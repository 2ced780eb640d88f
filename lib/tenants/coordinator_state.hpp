// lib/tenants/coordinator_state.hpp — the state behind a coordinator and behind tenants.
//
// Ground rules of coordinator_state:
//  * `word` holds the work in progress (jobs admitted and not yet retired) in
//    its low bits and, in owner_bit, whether the coordinator (or its tenant
//    entry) still holds the state. Admission raises it by CAS only while it is
//    below `limit`, so refusing a job never takes the mutex; each admitted
//    job lowers it once (coord_ticket::retire). Whoever takes it to zero
//    frees the state: the owner letting go when nothing is in progress, or
//    the last job out after the owner has gone.
//  * Everything below `mu` is guarded by it: the FIFO queue, the running
//    count and the figures. It is held for a few pointer moves and never
//    while user code runs or a task is woken. A mutex rather than a lock-free
//    queue because a cancelled waiter must leave from the middle of the queue
//    and a grant must pick the head and count it running in one step; the
//    critical sections are tens of nanoseconds and at most one per loop
//    contends at a time.
//  * Invariant: the queue is non-empty only while every slot is taken
//    (running == max_concurrency). A slot is freed by handing it to the head
//    of the queue if there is one, so a newcomer finding a free slot never
//    overtakes a waiter.
//  * Invariant: running + queued <= wip <= limit. A job is counted in wip
//    before it is queued and retired only after it has left the queue or
//    given back its slot, so the queue never holds more than max_queue.
//
// tenants_state: a sharded_registry (lib/core/sharded_registry.hpp) from tenant
// name to tenant_entry, whose references are the tenant's leases (jobs being
// admitted, queued or running). An entry, and so the tenant's coordinator,
// exists exactly while it has a lease; the registry decides the last one
// under the shard's mutex, where every arrival finds or makes its entry, so
// an arrival never lands on a coordinator being removed.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include <weft/coordinator.hpp>

#include "core/sharded_registry.hpp"

namespace weft::detail {

struct coordinator_state {
  static constexpr std::uint64_t owner_bit = std::uint64_t{1} << 63;
  static constexpr std::uint64_t wip_mask = owner_bit - 1;
  // The largest max_concurrency + max_queue: leaves room below owner_bit for
  // every job that could be admitted at once.
  static constexpr std::uint64_t max_limit = std::uint64_t{1} << 62;

  // std::invalid_argument naming the field when a coordinator cannot have these limits.
  static void validate(const coordinator_options& o);
  static coordinator_state* create(const coordinator_options& o, std::string name);
  // The owner lets go: frees the state now if nothing is in progress, or
  // leaves that to the last job to retire.
  void drop_owner() noexcept;

  // Reserves a unit of work in progress and grants `t` a slot or queues it
  // to be resumed at `h`; or, when the coordinator is full, refuses it
  // (t.refused_at_ says with how much work in progress).
  enum class admission { granted, queued, refused, closed };
  admission admit(coord_ticket& t, std::coroutine_handle<> h) noexcept;
  // Gives one unit of work in progress back; may free the state. Called once
  // per admitted job (coord_ticket::retire guarantees it).
  void release_unit() noexcept;
  coordinator_stats stats() const;
  // No new work from now on (admit says `closed`); every queued job's caller
  // is cancelled, so it leaves the queue and stops; running jobs finish.
  void close() noexcept;

  // owner_bit | work in progress. Every operation on it is seq_cst: it is
  // the one word admission, retirement and the owner's exit agree on, and on
  // x86 an RMW costs the same whatever its order.
  std::atomic<std::uint64_t> word{owner_bit};
  const std::size_t max_concurrency;
  const std::uint64_t limit;  // max_concurrency + max_queue
  const std::string name;
  // relaxed: a figure, written outside the mutex so refusals never take it;
  // nothing else is published through it.
  std::atomic<std::uint64_t> rejected{0};

  // Set once by close(), under mu; read first without it so that admission
  // after a close takes no unit of work. seq_cst, like `word`.
  std::atomic<bool> closed{false};
  mutable std::mutex mu;
  std::size_t running = 0;
  std::size_t queued = 0;
  coord_ticket* head = nullptr;  // FIFO: granted from head, admitted at tail
  coord_ticket* tail = nullptr;
  std::uint64_t completed = 0;
  std::uint64_t withdrawn = 0;

  // Queue operations, under mu.
  void push_back(coord_ticket* t) noexcept;
  void unlink(coord_ticket* t) noexcept;
  // Frees the slot `t` held and hands it to the head of the queue, if any;
  // returns the ticket granted, which the caller wakes after unlocking.
  coord_ticket* hand_over(bool ran) noexcept;

  coordinator_state(std::size_t c, std::uint64_t l, std::string n) : max_concurrency(c), limit(l), name(std::move(n)) {}
};

// One tenant's coordinator. Made under the registry's shard mutex by the
// tenant's first lease; destroyed, letting go of the coordinator, after the
// last lease has unlinked it.
struct tenant_entry {
  coordinator_state* state = nullptr;
  tenant_entry() = default;
  tenant_entry(const tenant_entry&) = delete;
  tenant_entry& operator=(const tenant_entry&) = delete;
  ~tenant_entry() {
    if (state) state->drop_owner();
  }
};

struct tenants_state {
  using registry = sharded_registry<tenant_entry>;

  explicit tenants_state(coordinator_options o) : per_tenant(std::move(o)) {}
  std::string name_of(std::string_view tenant) const;
  void drop_ref() noexcept;

  const coordinator_options per_tenant;
  registry entries;
  // Set by ~tenants (seq_cst), read by leases that make a coordinator.
  std::atomic<bool> closed{false};
  // The tenants object, plus one per entry: the registry stays alive while
  // a job may still reach it to remove its tenant. seq_cst, as `word` above.
  std::atomic<std::size_t> refs{1};
};

}  // namespace weft::detail
