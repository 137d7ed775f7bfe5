#include "bench/kv/kv_workload.h"

#include <cassert>
#include <cmath>

#include "bench/common/workload.h"

namespace pm::bench {

const char* key_choice_name(KeyChoice c) {
  return c == KeyChoice::kZipfian ? "zipfian" : "uniform";
}

std::vector<CellSpec> cell_matrix(const std::vector<int>& put_percents,
                                  const std::vector<int>& thread_counts) {
  std::vector<CellSpec> cells;
  for (KeyChoice c : {KeyChoice::kZipfian, KeyChoice::kUniform}) {
    for (int p : put_percents) {
      for (int t : thread_counts) cells.push_back({c, p, t});
    }
  }
  return cells;
}

Zipfian::Zipfian(uint64_t n, double theta) : n_(n), theta_(theta) {
  assert(n >= 2 && theta > 0 && theta < 1);
  zetan_ = 0;
  for (uint64_t i = 1; i <= n; i++) zetan_ += 1 / std::pow(double(i), theta);
  const double zeta2 = 1 + 1 / std::pow(2.0, theta);
  alpha_ = 1 / (1 - theta);
  eta_ = (1 - std::pow(2.0 / double(n), 1 - theta)) / (1 - zeta2 / zetan_);
}

uint64_t Zipfian::rank(double u) const {
  const double uz = u * zetan_;
  if (uz < 1) return 0;
  if (uz < 1 + std::pow(0.5, theta_)) return 1;
  const auto r = uint64_t(double(n_) * std::pow(eta_ * u - eta_ + 1, alpha_));
  return r < n_ ? r : n_ - 1;
}

KeyStreams::KeyStreams(uint64_t keys, double theta, uint64_t length, int max_threads) {
  assert(keys >= 2 && keys <= UINT32_MAX);
  const Zipfian zipf(keys, theta);
  for (int t = 0; t < max_threads; t++) {
    Rng rng(0x6b76'0000ull + uint64_t(t));
    std::vector<uint32_t>& z = zipf_.emplace_back(length);
    std::vector<uint32_t>& u = uniform_.emplace_back(length);
    for (uint64_t i = 0; i < length; i++) {
      const double unit = double(rng.next() >> 11) * 0x1.0p-53;
      z[i] = uint32_t(splitmix64(zipf.rank(unit)) % keys);
      u[i] = uint32_t(rng.below(keys));
    }
  }
}

}  // namespace pm::bench
