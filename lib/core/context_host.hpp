// lib/core/context_host.hpp — what the task-context protocol (lib/core/context.cpp)
// asks of the loop that runs a context. Defined by the loop (lib/core/loop.cpp),
// so the protocol sits below the loop and never includes it: the layers
// point one way (README, "Design"). Each call is made on a loop thread of
// the context's runtime unless it says otherwise.
#pragma once

#include <weft/detail/task_context.hpp>

namespace weft::detail {

// Queue ctx, which the caller just moved to queued (a wake or a cancel): on
// the calling loop when it belongs to ctx's runtime, else on the loop that
// ran ctx last. Any thread.
void schedule(task_context* ctx) noexcept;

// ctx's run on this loop ended with a wake pending: queue it here again,
// behind this turn's timers when it yielded.
void requeue_here(task_context* ctx, bool yielded) noexcept;

// ctx parks for the first time: it joins this loop's live list, through
// which shutdown cancels it wherever it runs later.
void join_live_list(task_context* ctx) noexcept;

// ctx's strand ended on this loop: it leaves its live list (if it joined
// one) and the loop counts the completion.
void strand_ended(task_context* ctx) noexcept;

}  // namespace weft::detail
