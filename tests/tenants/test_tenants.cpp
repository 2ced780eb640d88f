// tests/tenants/test_tenants.cpp — tenants: one coordinator per tenant, a tenant at
// its limit refused without holding up another, idle tenants removed (also
// under tenants coming and going on two loops), the tenant's name in its
// refusal and copied into the job, and ~tenants closing every tenant.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <weft/coordinator.hpp>
#include <weft/tenants.hpp>
#include <weft/weft.hpp>

#include "coordinator_support.hpp"
#include "support.hpp"

using namespace weft;
using namespace std::chrono_literals;
using namespace test;  // support.hpp and coordinator_support.hpp

TEST_SUITE("tenants") {

namespace {
task<int> tenant_gated_call(tenants& t, std::string name, task_gate& g, occupancy& occ, int v) {
  co_return co_await t.execute(name, gated_job(g, occ, v));
}
}  // namespace

TEST_CASE("a tenant at its limit is refused at once and does not hold up another tenant") {
  runtime rt(loops(2));
  tenants ts(limits(1, 1));
  task_gate g;
  occupancy occ;
  auto a1 = rt.spawn(tenant_gated_call(ts, "acme", g, occ, 1));
  auto a2 = rt.spawn(tenant_gated_call(ts, "acme", g, occ, 2));
  REQUIRE(eventually([&] {
    auto s = ts.stats("acme");
    return s && settled(*s, 1, 1);
  }, hang_limit));
  auto a3 = rt.spawn(tenant_gated_call(ts, "acme", g, occ, 3));
  CHECK(outcome_of(a3) == "too_many_tasks: Work in progress 3 exceeds 2 jobs in acme");
  // Another tenant runs to the end while acme is full and its gate shut.
  auto other = [](tenants& t) -> task<int> { co_return co_await t.execute("globex", []() -> task<int> { co_return 9; }); };
  CHECK(rt.block_on(other(ts)) == 9);
  CHECK(ts.size() == 1);
  g.open();
  CHECK(a1.join_blocking() == 1);
  CHECK(a2.join_blocking() == 2);
}

TEST_CASE("an idle tenant is removed: size returns to zero and a returning tenant starts afresh") {
  runtime rt(loops(2));
  tenants ts(limits(2, 5));
  CHECK(ts.size() == 0);
  task_gate g;
  occupancy occ;
  std::vector<join_handle<int>> hs;
  for (int i = 0; i < 4; ++i) hs.push_back(rt.spawn(tenant_gated_call(ts, i % 2 ? "odd" : "even", g, occ, i)));
  REQUIRE(eventually([&] { return ts.size() == 2 && occ.inside == 4; }, hang_limit));
  g.open();
  for (int i = 0; i < 4; ++i) CHECK(hs[i].join_blocking() == i);
  CHECK(ts.size() == 0);
  CHECK_FALSE(ts.stats("odd").has_value());
  CHECK(rt.block_on(ts.execute("odd", []() -> task<int> { co_return 1; })) == 1);
  CHECK(ts.size() == 0);
  // Rejections do not keep a tenant alive either.
  tenants tiny(limits(1, 0));
  task_gate shut;
  auto holder = rt.spawn(tenant_gated_call(tiny, "t", shut, occ, 1));
  REQUIRE(eventually([&] { return tiny.size() == 1 && occ.inside == 1; }, hang_limit));
  auto refused = rt.spawn(tenant_gated_call(tiny, "t", shut, occ, 2));
  CHECK(outcome_of(refused).rfind("too_many_tasks", 0) == 0);
  shut.open();
  CHECK(holder.join_blocking() == 1);
  CHECK(tiny.size() == 0);
}

TEST_CASE("a tenant's refusal names the tenant, prefixed by per_tenant.name when it is set") {
  runtime rt(loops(1));
  tenants ts(limits(1, 0, "api"));
  task_gate g;
  occupancy occ;
  auto holder = rt.spawn(tenant_gated_call(ts, "acme", g, occ, 1));
  REQUIRE(eventually([&] { return occ.inside == 1; }, hang_limit));
  auto refused = rt.spawn(tenant_gated_call(ts, "acme", g, occ, 2));
  CHECK(outcome_of(refused) == "too_many_tasks: Work in progress 2 exceeds 1 jobs in api/acme");
  g.open();
  CHECK(holder.join_blocking() == 1);
}

TEST_CASE("the tenant name is copied: the caller's string may be gone before the task starts") {
  runtime rt(loops(1));
  tenants ts(limits(1, 0));
  task<int> t;
  {
    std::string name = "a-tenant-name-longer-than-any-small-string-buffer";
    t = ts.execute(name, []() -> task<int> { co_return 3; });
    name.assign(name.size(), 'x');
  }
  CHECK(rt.block_on(std::move(t)) == 3);
  CHECK(ts.size() == 0);
}

TEST_CASE("tenants coming and going on two loops never lose a job, never exceed their limit, and all leave") {
  runtime rt(loops(2));
  constexpr int tenant_count = 5;
  tenants ts(limits(2, 1000));
  std::vector<occupancy> occ(tenant_count);
  std::atomic<int> done{0};
  auto caller = [](tenants& t, occupancy& o, std::atomic<int>& d, int tenant, int spin) -> task<void> {
    auto job = [&o, &d, spin]() -> task<void> {
      o.enter();
      for (int k = 0; k < spin; ++k) co_await yield();
      o.leave();
      ++d;
    };
    co_await t.execute("tenant-" + std::to_string(tenant), std::move(job));
  };
  std::mt19937 rng(99);
  int total = 0;
  for (int wave = 0; wave < 200; ++wave) {
    // Small waves: tenants often go idle, are removed, and come back.
    std::vector<join_handle<void>> hs;
    const int n = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < n; ++i) {
      const int tenant = static_cast<int>(rng() % tenant_count);
      hs.push_back(rt.spawn(caller(ts, occ[tenant], done, tenant, static_cast<int>(rng() % 3))));
    }
    for (auto& h : hs) h.join_blocking();
    total += n;
    REQUIRE(ts.size() == 0);
  }
  CHECK(done == total);
  for (auto& o : occ) CHECK(o.most <= 2);
}

TEST_CASE("tenants destroyed closes every tenant: queued jobs stop, running ones finish") {
  runtime rt(loops(2));
  auto ts = std::make_unique<tenants>(limits(1, 5));
  task_gate g;
  occupancy occ;
  std::vector<join_handle<int>> hs;
  for (int i = 0; i < 6; ++i) hs.push_back(rt.spawn(tenant_gated_call(*ts, i % 2 ? "x" : "y", g, occ, i)));
  REQUIRE(eventually([&] {
    auto x = ts->stats("x"), y = ts->stats("y");
    return x && y && settled(*x, 1, 2) && settled(*y, 1, 2);
  }, hang_limit));
  ts.reset();
  g.open();
  // One job of each tenant was running and finishes; the other four were
  // queued and their callers stopped (which ones depends on arrival order).
  const endings e = endings_of(hs);
  CHECK(e.values == 2);
  CHECK(e.stopped == 4);
  CHECK(occ.entered == 2);
}

}  // TEST_SUITE
