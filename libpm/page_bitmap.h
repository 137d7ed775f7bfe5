// PageBitmap: one bit per page of a region, set from any thread (including a
// signal handler), drained in ascending runs by one thread at a time.
// Three levels: a summary bit per 64-page word and a top bit per summary
// word keep draining proportional to the dirty part, not to the region
// (64 GiB of address space is 4096 summary words, but only 64 top words).
#ifndef LIBPM_PAGE_BITMAP_H_
#define LIBPM_PAGE_BITMAP_H_

#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "libpm/tracker.h"

namespace pm {

class PageBitmap {
 public:
  // Address space for max_pages bits; only touched words take memory.
  explicit PageBitmap(uint64_t max_pages)
      : words_((max_pages + 63) / 64),
        summary_words_((words_ + 63) / 64),
        top_words_((summary_words_ + 63) / 64) {
    bits_ = map_words(words_);
    summary_ = map_words(summary_words_);
    top_ = map_words(top_words_);
  }
  ~PageBitmap() {
    ::munmap(bits_, words_ * 8);
    ::munmap(summary_, summary_words_ * 8);
    ::munmap(top_, top_words_ * 8);
  }
  PageBitmap(const PageBitmap&) = delete;
  PageBitmap& operator=(const PageBitmap&) = delete;

  uint64_t max_pages() const { return words_ * 64; }

  // n zeroed words of address space (MAP_NORESERVE): pages only once touched.
  static std::atomic<uint64_t>* map_words(uint64_t n) {
    void* p = ::mmap(nullptr, n * 8, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    // Address space of at most max_size/512 bytes (LineMasks; a bitmap
    // takes max_size/32768): failure is an exhausted address space, not
    // user input.
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<std::atomic<uint64_t>*>(p);
  }

  // Async-signal-safe.
  void set(uint64_t page) {
    uint64_t w = page / 64;
    if ((bits_[w].load(std::memory_order_relaxed) >> (page % 64) & 1) == 0) {
      bits_[w].fetch_or(1ull << (page % 64), std::memory_order_relaxed);
    }
    set_bit(summary_, w);
    set_bit(top_, w / 64);
  }

  bool test(uint64_t page) const {
    return (bits_[page / 64].load(std::memory_order_relaxed) >> (page % 64)) & 1;
  }

  // Appends set pages as ascending runs; clears them when `clear`.
  void collect(bool clear, std::vector<PageRun>* out) {
    for (uint64_t t = 0; t < top_words_; t++) {
      uint64_t tw = take(top_, t, clear);
      while (tw != 0) {
        uint64_t s = t * 64 + static_cast<uint64_t>(__builtin_ctzll(tw));
        tw &= tw - 1;
        uint64_t sw = take(summary_, s, clear);
        while (sw != 0) {
          uint64_t w = s * 64 + static_cast<uint64_t>(__builtin_ctzll(sw));
          sw &= sw - 1;
          append_word(w, take(bits_, w, clear), out);
        }
      }
    }
  }

 private:
  static void set_bit(std::atomic<uint64_t>* words, uint64_t i) {
    if ((words[i / 64].load(std::memory_order_relaxed) >> (i % 64) & 1) == 0) {
      words[i / 64].fetch_or(1ull << (i % 64), std::memory_order_relaxed);
    }
  }

  // A plain load first: most words are empty, and an exchange of each (a
  // locked instruction) was most of a small commit's scan of the top level.
  static uint64_t take(std::atomic<uint64_t>* words, uint64_t i, bool clear) {
    const uint64_t v = words[i].load(std::memory_order_relaxed);
    return clear && v != 0 ? words[i].exchange(0, std::memory_order_relaxed) : v;
  }

  static void append_word(uint64_t w, uint64_t bits, std::vector<PageRun>* out) {
    while (bits != 0) {
      uint64_t page = w * 64 + static_cast<uint64_t>(__builtin_ctzll(bits));
      bits &= bits - 1;
      if (!out->empty() && out->back().first + out->back().count == page) {
        out->back().count++;
      } else {
        out->push_back({page, 1});
      }
    }
  }

  uint64_t words_;
  uint64_t summary_words_;
  uint64_t top_words_;
  std::atomic<uint64_t>* bits_;
  std::atomic<uint64_t>* summary_;
  std::atomic<uint64_t>* top_;
};

// LineMasks: a 64-bit mask per page, one bit per 64-byte line, set from
// any thread and taken by one. Only touched pages' words take memory.
class LineMasks {
 public:
  explicit LineMasks(uint64_t max_pages) : n_(max_pages), masks_(PageBitmap::map_words(n_)) {}
  ~LineMasks() { ::munmap(masks_, n_ * 8); }
  LineMasks(const LineMasks&) = delete;
  LineMasks& operator=(const LineMasks&) = delete;

  void set(uint64_t page, uint64_t mask) {
    if ((masks_[page].load(std::memory_order_relaxed) & mask) != mask) {
      masks_[page].fetch_or(mask, std::memory_order_relaxed);
    }
  }
  uint64_t peek(uint64_t page) const { return masks_[page].load(std::memory_order_relaxed); }
  // The mask, cleared.
  uint64_t take(uint64_t page) {
    return masks_[page].load(std::memory_order_relaxed) != 0
               ? masks_[page].exchange(0, std::memory_order_relaxed)
               : 0;
  }

 private:
  uint64_t n_;
  std::atomic<uint64_t>* masks_;
};

}  // namespace pm

#endif  // LIBPM_PAGE_BITMAP_H_
