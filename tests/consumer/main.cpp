// A user's program: spawns, joins and combines tasks; exits 0 when the sum is right.
#include <cstdio>
#include <vector>

#include <weft/weft.hpp>

weft::task<int> square(int v) {
  co_await weft::yield();
  co_return v * v;
}

int main() {
  weft::runtime rt;
  int total = rt.block_on([]() -> weft::task<int> {
    std::vector<weft::join_handle<int>> hs;
    for (int i = 1; i <= 10; ++i) hs.push_back(weft::spawn(square(i)));
    int sum = 0;
    for (auto& h : hs) sum += co_await h;
    auto [a, b] = co_await weft::when_all(square(2), square(3));
    co_return sum + a + b;
  }());
  std::printf("consumer: %d\n", total);
  return total == 385 + 13 ? 0 : 1;
}
