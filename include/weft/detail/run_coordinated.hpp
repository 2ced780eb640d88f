// weft/detail/run_coordinated.hpp — run_coordinated: the task that
// coordinator::execute and tenants::execute return. It takes the job's lease
// on where it is admitted (a Source: a coordinator directly, or a tenant,
// weft/detail/tenant_source.hpp) when the task starts, is admitted through a
// coord_ticket, and runs the job: a coroutine job inside this task, a
// blocking one through offload.
//
// Order of destruction is the invariant: the lease is declared before the
// ticket, so the ticket gives back its slot and its unit of work before the
// lease lets go of where the job was admitted (a tenant's last lease removes
// the tenant, and its coordinator, as it goes).
#pragma once

#include <functional>
#include <utility>

#include <weft/detail/coord_ticket.hpp>
#include <weft/detail/coordinated_result.hpp>
#include <weft/offload.hpp>
#include <weft/task.hpp>

namespace weft::detail {

// A Source names where the job is admitted; its lease is taken when the task
// starts (not when it is created) and given back after the ticket.
struct direct_source {
  coordinator_state* state;
  struct lease {
    coordinator_state* s;
    explicit lease(direct_source src) noexcept : s(src.state) {}
    coordinator_state* state() const noexcept { return s; }
  };
};

// A blocking job that records, on the pool thread, that it was started: a
// job withdrawn from the pool's queue (its caller stopped first) never ran
// and is counted withdrawn, not completed. The flag is read on the caller's
// loop after the pool's wake, which orders it.
template <class F>
struct start_marked {
  F fn;
  bool* started;
  template <class... A>
  auto operator()(A&&... a) -> decltype(fn(std::forward<A>(a)...)) {
    *started = true;
    return fn(std::forward<A>(a)...);
  }
};

template <class Source, class F>
task<coordinated_result_t<F>> run_coordinated(Source src, F job) {
  typename Source::lease lease(std::move(src));  // declared first: outlives the ticket
  coord_ticket ticket(lease.state());
  co_await ticket;
  if constexpr (coroutine_job<F>) {
    *ticket.ran_flag() = true;
    // `job` stays in this frame until its task has finished.
    co_return co_await std::invoke(job);
  } else {
    // The awaiter owns the callable until the pool has finished with it.
    start_marked<F> marked{std::move(job), ticket.ran_flag()};
    co_return co_await offload(std::move(marked));
  }
}

}  // namespace weft::detail
