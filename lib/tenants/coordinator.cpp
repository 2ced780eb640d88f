// lib/tenants/coordinator.cpp — admission, the FIFO queue, hand-over of slots,
// withdrawal of cancelled waiters, and the per-tenant registry.
//
// The life of one job (a coord_ticket in its task's frame):
//   outside --admit--> granted ------------------------------> (frame ends) leave: hand over, retire
//           \--admit--> queued --grant (any loop)--> granted --^
//                              \--cancel hook (its runner)--> withdrawn: retire at once, wake
// A cancelled caller stops instead of resuming (detail/context.hpp): a
// granted job whose caller was cancelled before it resumed hands its slot on
// without running, as its ticket is destroyed (counted withdrawn, not
// completed). See lib/tenants/coordinator_state.hpp for the invariants.
#include "tenants/coordinator_state.hpp"

#include <cassert>
#include <stdexcept>
#include <string>
#include <utility>

#include <weft/errors.hpp>

namespace weft {
namespace detail {

// ---- coordinator_state -------------------------------------------------------

void coordinator_state::validate(const coordinator_options& o) {
  if (o.max_concurrency == 0)
    throw std::invalid_argument(
        "weft: coordinator_options::max_concurrency must be at least 1 (jobs that may run at once)");
  if (o.max_concurrency > max_limit || o.max_queue > max_limit - o.max_concurrency)
    throw std::invalid_argument(
        "weft: coordinator_options::max_concurrency + max_queue must be below 2^62; "
        "use a smaller max_queue");
}

coordinator_state* coordinator_state::create(const coordinator_options& o, std::string name) {
  validate(o);
  if (name.empty()) name = "coordinator";
  return new coordinator_state(o.max_concurrency, o.max_concurrency + o.max_queue, std::move(name));
}

void coordinator_state::drop_owner() noexcept {
  if ((word.fetch_and(~owner_bit) & wip_mask) == 0) delete this;
}

void coordinator_state::release_unit() noexcept {
  // The previous value 1 means: no owner, and this was the last job.
  if (word.fetch_sub(1) == 1) delete this;
}

coordinator_state::admission coordinator_state::admit(coord_ticket& t, std::coroutine_handle<> h) noexcept {
  if (closed.load()) return admission::closed;
  std::uint64_t w = word.load();
  do {
    const std::uint64_t wip = w & wip_mask;
    if (wip >= limit) {
      rejected.fetch_add(1, std::memory_order_relaxed);
      t.refused_at_ = static_cast<std::size_t>(wip + 1);
      return admission::refused;
    }
  } while (!word.compare_exchange_weak(w, w + 1));
  std::lock_guard<std::mutex> g(mu);
  if (closed.load()) {
    // Closed between the look above and this lock: the unit is held, and
    // given back as the ticket ends (leave, as for a withdrawn job), which
    // keeps the state alive while await_resume names the coordinator.
    t.phase_ = coord_ticket::phase::withdrawn;
    return admission::closed;
  }
  if (running < max_concurrency) {
    assert(head == nullptr && "a waiter is queued while a slot is free");
    ++running;
    t.phase_ = coord_ticket::phase::granted;
    return admission::granted;
  }
  // Parked before it becomes visible in the queue: a job finishing on another
  // loop may grant and wake this task as soon as the mutex is let go.
  t.ctx_->resume_point = h;
  t.ctx_->hook = &t;
  push_back(&t);
  ++queued;
  assert(queued <= limit - max_concurrency && "the queue outgrew max_queue");
  t.phase_ = coord_ticket::phase::queued;
  return admission::queued;
}

void coordinator_state::push_back(coord_ticket* t) noexcept {
  t->next_ = nullptr;
  t->prev_ = tail;
  if (tail) tail->next_ = t;
  else head = t;
  tail = t;
}

void coordinator_state::unlink(coord_ticket* t) noexcept {
  if (t->prev_) t->prev_->next_ = t->next_;
  else head = t->next_;
  if (t->next_) t->next_->prev_ = t->prev_;
  else tail = t->prev_;
  t->prev_ = t->next_ = nullptr;
}

coord_ticket* coordinator_state::hand_over(bool ran) noexcept {
  assert(running > 0 && running <= max_concurrency);
  if (ran) ++completed;
  else ++withdrawn;
  coord_ticket* next = head;
  // Closed: the queued callers are being cancelled and leave the queue
  // through their cancel hooks; none of them may start meanwhile.
  if (next == nullptr || closed.load()) {
    --running;
    return nullptr;
  }
  // The slot goes straight to the head: running stays at max_concurrency.
  unlink(next);
  --queued;
  next->phase_ = coord_ticket::phase::granted;
  return next;
}

void coordinator_state::close() noexcept {
  std::lock_guard<std::mutex> g(mu);
  if (closed.exchange(true)) return;
  // Under mu: a queued ticket cannot leave the queue meanwhile (its cancel
  // hook takes mu), so its task, parked here, is alive for request_cancel,
  // which only flags it and posts the delivery (no hook runs on our stack).
  for (coord_ticket* t = head; t != nullptr; t = t->next_) request_cancel(t->ctx_);
}

coordinator_stats coordinator_state::stats() const {
  coordinator_stats s;
  {
    std::lock_guard<std::mutex> g(mu);
    s.running = running;
    s.queued = queued;
    s.completed = completed;
    s.withdrawn = withdrawn;
  }
  s.rejected = rejected.load(std::memory_order_relaxed);
  return s;
}

// ---- coord_ticket --------------------------------------------------------------

bool coord_ticket::await_suspend(std::coroutine_handle<> h) {
  task_context* ctx = current_context();
  if (ctx == nullptr)
    throw std::logic_error(
        "weft: coordinator/tenants execute() awaited outside a weft task; co_await it from a task, "
        "or use runtime::block_on");
  ctx_ = ctx;
  // A cancelled caller is not admitted: the job never runs and takes no place.
  if (stop_if_cancelled(ctx, h)) return true;
  const coordinator_state::admission a = state_->admit(*this, h);
  closed_out_ = a == coordinator_state::admission::closed;
  return a == coordinator_state::admission::queued;
}

void coord_ticket::await_resume() {
  if (closed_out_)
    throw rejected_execution("weft: " + state_->name + " is closed; it takes no new work. Use another "
                             "coordinator, or submit before close()");
  if (phase_ == phase::outside)
    throw too_many_tasks(refused_at_, static_cast<std::size_t>(state_->limit), state_->name);
  // Granted (a withdrawn caller was cancelled, and is stopped, never resumed).
  assert(phase_ == phase::granted);
}

void coord_ticket::cancel_while_queued(cancel_hook* h) noexcept {
  auto* self = static_cast<coord_ticket*>(h);
  coordinator_state* s = self->state_;
  {
    std::lock_guard<std::mutex> g(s->mu);
    // Already granted: the grant's wake is the one wake, and the task,
    // resumed cancelled, stops; its ticket then hands the slot on unrun.
    if (self->phase_ != phase::queued) return;
    s->unlink(self);
    --s->queued;
    ++s->withdrawn;
    self->phase_ = phase::withdrawn;
  }
  self->retire();  // its place is free now, not when the frame unwinds
  wake(self->ctx_);
}

void coord_ticket::leave() noexcept {
  // A task suspended in the queue is never destroyed: its cancel hook takes
  // it out of the queue before it is stopped.
  assert(phase_ != phase::queued && "a coordinator job's frame was destroyed while it waited in the queue");
  if (phase_ == phase::granted) {
    coord_ticket* next;
    {
      std::lock_guard<std::mutex> g(state_->mu);
      next = state_->hand_over(ran_);  // not ran: stopped between the grant and its resumption
    }
    // Woken before retiring: the next job holds a unit of work in progress,
    // so the state is alive for this wake whatever the owner did meanwhile.
    if (next) wake(next->ctx_);
  }
  retire();
}

void coord_ticket::retire() noexcept {
  bool expected = false;
  // seq_cst, though every path that retires a ticket runs while its task is
  // running (so never two at once): the CAS guards against a second path (a
  // withdrawal, then the frame ending), possibly on another loop after a
  // migration, and costs the same either way.
  if (retired_.compare_exchange_strong(expected, true)) state_->release_unit();
  // state_ may be gone now.
}

// ---- tenants -------------------------------------------------------------------

std::string tenants_state::name_of(std::string_view tenant) const {
  if (per_tenant.name.empty()) return std::string(tenant);
  std::string n = per_tenant.name;
  n += '/';
  n += tenant;
  return n;
}

void tenants_state::drop_ref() noexcept {
  if (refs.fetch_sub(1) == 1) delete this;
}

tenant_source::lease::lease(tenant_source src) : tenants_(src.tenants) {
  tenants_state& ts = *tenants_;
  entry_ = ts.entries.ref(src.name, [&](tenant_entry& fresh, no_shard_state&) {
    fresh.state = coordinator_state::create(ts.per_tenant, ts.name_of(src.name));
    ts.refs.fetch_add(1);
    // A job that starts after its tenants object was destroyed finds a new
    // coordinator closed, like every other one.
    if (ts.closed.load()) fresh.state->close();
  });
  state_ = entry_->state;
}

tenant_source::lease::~lease() {
  // The last lease out removes the tenant; its coordinator's state goes as
  // the entry is destroyed, outside the registry's lock.
  if (tenants_state::registry::unref(entry_)) tenants_->drop_ref();
}

}  // namespace detail

// ---- public surface --------------------------------------------------------------

coordinator::coordinator(coordinator_options o) : state_(detail::coordinator_state::create(o, std::move(o.name))) {}
coordinator::~coordinator() { state_->drop_owner(); }
coordinator_stats coordinator::stats() const { return state_->stats(); }
void coordinator::close() noexcept { state_->close(); }
const std::string& coordinator::name() const noexcept { return state_->name; }

tenants::tenants(coordinator_options per_tenant) {
  // Refuse bad limits here, not at the first job of the first tenant.
  detail::coordinator_state::validate(per_tenant);
  state_ = new detail::tenants_state(std::move(per_tenant));
}
tenants::~tenants() {
  // Every tenant's coordinator closes (queued jobs stop, running ones
  // finish); the state lives on until the last of them is done.
  state_->closed.store(true);
  state_->entries.for_each([](detail::tenant_entry& e) { e.state->close(); });
  state_->drop_ref();
}

std::size_t tenants::size() const noexcept { return state_->entries.size(); }

std::optional<coordinator_stats> tenants::stats(std::string_view tenant) const {
  return state_->entries.find(tenant, [](const detail::tenant_entry* e) -> std::optional<coordinator_stats> {
    if (e == nullptr) return std::nullopt;
    return e->state->stats();
  });
}

}  // namespace weft
