// LatencyHistogram: operation latencies in nanoseconds, HDR-style
// log-linear buckets (32 per power of two, so a percentile is within 3.2% of
// the true value), cheap enough to record every operation.
//
// Written here rather than taken from HdrHistogram_c because Debian bookworm
// does not package that library, and this is all `pm bench kv` needs:
// record, merge, mean and percentiles.
//
// Thread safety: none; each thread records into its own and they are merged.
#ifndef TOOLS_BENCH_KV_KV_HISTOGRAM_H_
#define TOOLS_BENCH_KV_KV_HISTOGRAM_H_

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

namespace pm::bench {

class LatencyHistogram {
 public:
  void record(uint64_t ns) {
    counts_[index(ns)]++;
    n_++;
    sum_ += ns;
    max_ = std::max(max_, ns);
  }

  void merge(const LatencyHistogram& o) {
    for (size_t i = 0; i < kBuckets; i++) counts_[i] += o.counts_[i];
    n_ += o.n_;
    sum_ += o.sum_;
    max_ = std::max(max_, o.max_);
  }

  uint64_t count() const { return n_; }
  double mean() const { return n_ ? double(sum_) / double(n_) : 0; }
  uint64_t max() const { return max_; }

  // The highest value of the bucket holding the sample of rank ceil(p% * n),
  // capped at the largest value recorded; 0 when empty.
  uint64_t percentile(double p) const {
    if (n_ == 0) return 0;
    const auto rank = std::max<uint64_t>(1, uint64_t(std::ceil(p / 100.0 * double(n_))));
    uint64_t seen = 0;
    for (size_t i = 0; i < kBuckets; i++) {
      seen += counts_[i];
      if (seen >= rank) return std::min(highest(i), max_);
    }
    return max_;
  }

 private:
  static constexpr int kSubBits = 5;
  static constexpr uint64_t kSub = 1u << kSubBits;
  static constexpr size_t kBuckets = (64 - kSubBits + 1) * kSub;

  // Values below kSub have a bucket each; above, bucket (shift + 1, mantissa)
  // holds [mantissa << shift, (mantissa + 1) << shift) with mantissa in [kSub, 2 kSub).
  static size_t index(uint64_t v) {
    if (v < kSub) return size_t(v);
    const int shift = 63 - __builtin_clzll(v) - kSubBits;
    return size_t(shift + 1) * kSub + size_t((v >> shift) - kSub);
  }
  static uint64_t highest(size_t i) {
    if (i < kSub) return i;
    const uint64_t shift = i / kSub - 1;
    return ((kSub + i % kSub + 1) << shift) - 1;
  }

  std::array<uint64_t, kBuckets> counts_{};
  uint64_t n_ = 0, sum_ = 0, max_ = 0;
};

}  // namespace pm::bench

#endif  // TOOLS_BENCH_KV_KV_HISTOGRAM_H_
