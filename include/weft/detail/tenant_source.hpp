// weft/detail/tenant_source.hpp — tenant_source: the Source of a tenants
// job (see weft/detail/run_coordinated.hpp). Its lease finds or makes the
// tenant's coordinator in the tenants' registry (lib/tenants/coordinator_state.hpp,
// lib/core/sharded_registry.hpp) and counts the job in it; the last lease out
// removes the tenant, so a tenant exists exactly while it has a job.
#pragma once

#include <string>

namespace weft::detail {

// All three in lib/tenants/coordinator_state.hpp.
struct coordinator_state;
struct tenants_state;
struct tenant_entry;

// Where a tenant's job is admitted. The name is copied into the job's frame:
// the task is lazy, and the caller's string_view may be gone when it starts.
struct tenant_source {
  tenants_state* tenants;
  std::string name;

  class lease {
   public:
    // Finds or makes the tenant's coordinator and counts this job in it.
    explicit lease(tenant_source src);
    // Uncounts the job; the last one out removes the tenant.
    ~lease();
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    coordinator_state* state() const noexcept { return state_; }

   private:
    tenants_state* tenants_;
    tenant_entry* entry_;
    coordinator_state* state_;
  };
};

}  // namespace weft::detail
