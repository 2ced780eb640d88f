// weft/detail/fn_node.hpp — the node of a plain job: a `job` made from a
// callable, or a callable given to bounded_elastic::execute().
//
// It keeps the callable and, after running, what it threw; finish hands that
// back (the pool reports it to on_error, a `job` called by hand rethrows it).
// Nobody waits on it, so dropping it only destroys it.
#pragma once

#include <weft/detail/job_invoke.hpp>
#include <weft/detail/job_node.hpp>

#include <exception>
#include <stop_token>
#include <utility>

namespace weft::detail {

template <class F>
struct fn_node final : job_node {
  F fn;
  std::exception_ptr error;

  explicit fn_node(F f) : fn(std::move(f)) { ops = &table; }
  static void run(job_node* n, std::stop_token st) noexcept {
    auto* self = static_cast<fn_node*>(n);
    try {
      invoke_job(self->fn, std::move(st));
    } catch (...) {
      self->error = std::current_exception();
    }
  }
  static std::exception_ptr finish(job_node* n) noexcept {
    auto* self = static_cast<fn_node*>(n);
    std::exception_ptr e = std::move(self->error);
    delete self;
    return e;
  }
  static void drop(job_node* n, const char*) noexcept { delete static_cast<fn_node*>(n); }
  static constexpr job_ops table{&run, &finish, &drop};
};

}  // namespace weft::detail
