// weft/tenants.hpp — one coordinator per tenant name, made on first use and
// removed as soon as the tenant has no work in progress.
//
// Guarantees:
//  * Each tenant gets the limits of `per_tenant`, on its own: a tenant at
//    its limit is refused without waiting for, or holding up, any other.
//  * A tenant's coordinator exists exactly while some job of it is in
//    progress (admitted and not finished, or being admitted). Removal and
//    arrival are decided under the same lock, so an arrival always lands on
//    a live coordinator, never on one being removed; a tenant that went idle
//    and comes back starts afresh (its figures start from zero).
//  * The name in a tenant's too_many_tasks message is the tenant's name, or
//    `per_tenant.name + "/" + tenant` when per_tenant.name is set.
//
// Lifetime: as for coordinator — a tenants must outlive the start of every
// task it returned; jobs in progress keep its state alive.
//
//   weft::tenants per_customer({.max_concurrency = 4, .max_queue = 50});
//   auto reply = co_await per_customer.execute(customer_id, [&]() -> task<reply> { ... });
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <weft/coordinator.hpp>
#include <weft/detail/run_coordinated.hpp>
#include <weft/detail/tenant_source.hpp>
#include <weft/task.hpp>

namespace weft {

class tenants {
 public:
  // std::invalid_argument for per_tenant limits a coordinator would refuse.
  explicit tenants(coordinator_options per_tenant = {});
  ~tenants();
  tenants(const tenants&) = delete;
  tenants& operator=(const tenants&) = delete;

  // co_await t.execute(tenant, job) -> R: coordinator::execute on the
  // tenant's own coordinator (see weft/coordinator.hpp).
  template <class F>
    requires coordinator_job<F>
  task<detail::coordinated_result_t<F>> execute(std::string_view tenant, F job) {
    return detail::run_coordinated(detail::tenant_source{state_, std::string(tenant)}, std::move(job));
  }

  // Tenants with work in progress; idle ones are removed and not counted.
  std::size_t size() const noexcept;
  // A tenant's figures, or nullopt when it has no work in progress (an idle
  // tenant keeps nothing, its figures included).
  std::optional<coordinator_stats> stats(std::string_view tenant) const;

 private:
  detail::tenants_state* state_;
};

}  // namespace weft
