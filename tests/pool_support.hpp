// tests/pool_support.hpp — helpers the pool's two test files share: a gate
// that jobs wait on until the test opens it, a way to keep one worker busy
// behind a gate, and the calling thread's name.
#pragma once

#include <pthread.h>

#include <future>
#include <latch>
#include <string>

#include <weft/bounded_elastic.hpp>

namespace test {

// A gate jobs wait on until the test opens it.
class gate {
 public:
  void open() { p_.set_value(); }
  auto waiter() const {
    return [f = f_] { f.wait(); };
  }

 private:
  std::promise<void> p_;
  std::shared_future<void> f_ = p_.get_future().share();
};

// Occupies `n` workers of `pool` until `g` opens (the jobs are handed over
// together); returns once all of them are running.
inline void occupy(weft::bounded_elastic& pool, const gate& g, int n = 1) {
  std::latch started(n);
  for (int i = 0; i < n; ++i) {
    pool.execute([&started, w = g.waiter()] {
      started.count_down();
      w();
    });
  }
  started.wait();
}

inline std::string this_thread_name() {
  char buf[32] = {};
  pthread_getname_np(pthread_self(), buf, sizeof buf);
  return buf;
}

}  // namespace test
