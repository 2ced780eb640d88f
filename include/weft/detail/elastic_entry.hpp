// weft/detail/elastic_entry.hpp — the entry points of a bounded_elastic
// pool's core (lib/blocking/bounded_elastic.cpp), for the inline parts of the pool.
//
// The core (lib/blocking/elastic_core.hpp) is opaque here. It is reference counted:
// the pool object holds one reference and each suspended run() awaiter
// another, so an awaiter's cancel hook may still reach it after the pool
// object is gone.
#pragma once

#include <weft/detail/job_node.hpp>

#include <stop_token>

namespace weft::detail {

struct elastic_core;    // lib/blocking/elastic_core.hpp
struct elastic_access;  // lib/blocking/elastic_core.hpp: how tests reach the core

enum class admitted {
  queued,       // the pool owns the node now
  run_here,     // caller_runs: the caller must run then finish it
  discarded,    // the caller must drop it, with `why`
};
// Offers `n` to the pool. Throws rejected_execution (abort policy, or no
// thread could be started); `n` then still belongs to the caller, undelivered.
admitted elastic_admit(elastic_core* c, job_node* n, const char** why);
// Removes a still-queued node so it never runs. Returns false when the pool no
// longer holds it (running, finished, dropped or handed back).
bool elastic_withdraw(elastic_core* c, job_node* n) noexcept;
std::stop_token elastic_stop_token(elastic_core* c) noexcept;
void elastic_retain(elastic_core* c) noexcept;
void elastic_release(elastic_core* c) noexcept;

}  // namespace weft::detail
