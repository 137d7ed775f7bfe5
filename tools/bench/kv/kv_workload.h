// The workload of `pm bench kv` (after Bullet's evaluation): 16-byte keys
// and 100-byte values from bench/workload.h, key choice zipfian (skew 0.99,
// as YCSB) or uniform over the prefilled keys, drawn from streams created
// before the timed cells so that no engine pays for the random numbers.
#ifndef TOOLS_BENCH_KV_KV_WORKLOAD_H_
#define TOOLS_BENCH_KV_KV_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

namespace pm::bench {

enum class KeyChoice { kZipfian, kUniform };

// "zipfian", "uniform".
const char* key_choice_name(KeyChoice c);

// One timed cell of the matrix.
struct CellSpec {
  KeyChoice choice;
  int put_percent;  // 0..100; the rest are gets
  int threads;
};

// Cells in the order they run: per key choice, put ratios rising, each with
// every thread count. The last is the most write-heavy uniform cell, after
// which the kvstore's recovery is measured (its logs are then the fullest
// of distinct keys).
std::vector<CellSpec> cell_matrix(const std::vector<int>& put_percents,
                                  const std::vector<int>& thread_counts);

// YCSB's zipfian generator (Gray et al., "Quickly generating billion-record
// synthetic databases"): ranks in [0, n), rank 0 the most popular. Setup
// sums n terms (about 30 ms per million keys).
class Zipfian {
 public:
  Zipfian(uint64_t n, double theta);
  // u uniform in [0, 1).
  uint64_t rank(double u) const;

 private:
  uint64_t n_;
  double theta_, alpha_, zetan_, eta_;
};

// Key numbers each worker thread cycles through, per key choice. Zipfian
// ranks are scrambled over the key space (as YCSB's ScrambledZipfian) so the
// hot keys are not the first ones loaded.
class KeyStreams {
 public:
  KeyStreams(uint64_t keys, double theta, uint64_t length, int max_threads);
  const std::vector<uint32_t>& stream(KeyChoice c, int thread) const {
    return (c == KeyChoice::kZipfian ? zipf_ : uniform_)[size_t(thread)];
  }

 private:
  std::vector<std::vector<uint32_t>> zipf_, uniform_;
};

}  // namespace pm::bench

#endif  // TOOLS_BENCH_KV_KV_WORKLOAD_H_
