// Workload: the keys, values, hash, random numbers and clock every engine of
// `pm bench container` shares, so that two engines given the same index see
// byte-identical data and the same bucket.
#ifndef TOOLS_BENCH_COMMON_WORKLOAD_H_
#define TOOLS_BENCH_COMMON_WORKLOAD_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace pm::bench {

constexpr size_t kKeyBytes = 16;
constexpr size_t kValueBytes = 100;

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Key number i: 16 pseudo-random bytes, distinct for distinct i (the first
// word is a bijection of i).
inline void make_key(uint64_t i, unsigned char out[kKeyBytes]) {
  uint64_t w[2] = {splitmix64(i), splitmix64(i ^ 0x5555'5555'5555'5555ull)};
  std::memcpy(out, w, kKeyBytes);
}

// Value of key i: starts with i so that a get can verify what it found.
inline void make_value(uint64_t i, unsigned char out[kValueBytes]) {
  std::memset(out, static_cast<int>(i & 0xff), kValueBytes);
  std::memcpy(out, &i, sizeof i);
}

inline uint64_t value_id(const unsigned char* value) {
  uint64_t i;
  std::memcpy(&i, value, sizeof i);
  return i;
}

inline uint64_t hash_key(const unsigned char key[kKeyBytes]) {
  uint64_t w[2];
  std::memcpy(w, key, kKeyBytes);
  return splitmix64(w[0] ^ (w[1] << 32 | w[1] >> 32));
}

// Smallest power of two >= n (n >= 1).
inline uint64_t pow2_at_least(uint64_t n) {
  uint64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

// Uniform random numbers in [0, n); deterministic per seed.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() { return splitmix64(s_++); }
  uint64_t below(uint64_t n) { return static_cast<uint64_t>((__uint128_t{next()} * n) >> 64); }

 private:
  uint64_t s_;
};

inline uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace pm::bench

#endif  // TOOLS_BENCH_COMMON_WORKLOAD_H_
