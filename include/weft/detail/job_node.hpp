// weft/detail/job_node.hpp — the intrusive unit a bounded_elastic pool queues.
//
// Every way into the pool (a `job`, execute, submit, run) ends up as a
// job_node with a table of three operations. Its owner — the `job` holding
// it, or the pool once it is admitted — calls exactly one of: run then
// finish, or drop. The node carries the pool's bookkeeping itself, so
// queueing allocates nothing.
#pragma once

#include <exception>
#include <stop_token>

namespace weft::detail {

struct job_node;

struct job_ops {
  // Runs the callable; keeps its result or exception in the node. Never throws.
  void (*run)(job_node*, std::stop_token pool_stop) noexcept;
  // Delivers the outcome (future, awaiter) and releases the node. Returns an
  // exception nobody else will observe (an execute()d job threw), if any.
  std::exception_ptr (*finish)(job_node*) noexcept;
  // The node will never run: tell whoever waits (rejected_execution with `why`)
  // and release the node.
  void (*drop)(job_node*, const char* why) noexcept;
};

struct job_node {
  const job_ops* ops = nullptr;
  // Pool bookkeeping, guarded by the pool's mutex: the links of the worker
  // queue holding the node, and that queue (null when the node is not
  // queued); the links of the pool's admission order, kept under the
  // discard_oldest policy only (lib/blocking/elastic_backlog.hpp).
  job_node* prev = nullptr;
  job_node* next = nullptr;
  void* queue = nullptr;
  job_node* older = nullptr;
  job_node* newer = nullptr;
};

// Why a job ended unrun, as its awaiter or future sees it.
inline constexpr const char* dropped_unrun =
    "weft: the job was destroyed without being run (handed back by shutdown_now, or discarded)";

}  // namespace weft::detail
