// weft/detail/sched_node.hpp — the unit of work every loop queue holds.
//
// A sched_node is an intrusive link plus what to do with it: a task's context
// (its run resumes the task), a never-claimed spawned task (its run builds the
// task's context), or a loop message (stop, quit). Queues (lib/core/run_queue.hpp,
// lib/core/steal_queue.hpp, lib/core/inbox.hpp) own `next` while the node is in them;
// whoever pops it calls `run` once.
#pragma once

namespace weft::detail {

struct sched_node {
  sched_node* next = nullptr;
  void (*run)(sched_node*) noexcept = nullptr;
};

}  // namespace weft::detail
