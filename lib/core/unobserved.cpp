// lib/core/unobserved.cpp — report_unobserved (lib/core/unobserved.hpp).
#include "core/unobserved.hpp"

#include <cstdio>

namespace weft::detail {

void report_unobserved(const std::function<void(std::exception_ptr)>& handler, const std::exception_ptr& e,
                       const char* from, const char* name) noexcept {
  if (handler) {
    try {
      handler(e);
      return;
    } catch (...) {
      // A handler that throws has nobody to report to; fall through to stderr.
    }
  }
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "weft: unobserved exception from %s%s%s%s: %s\n", from, name ? " '" : "", name ? name : "",
                 name ? "'" : "", ex.what());
  } catch (...) {
    std::fprintf(stderr, "weft: unobserved exception of unknown type from %s%s%s%s\n", from, name ? " '" : "",
                 name ? name : "", name ? "'" : "");
  }
}

}  // namespace weft::detail
