// Progress: one line per step on stderr, only when stderr is a terminal, so
// that redirected output and CTest logs hold results only.
#ifndef TOOLS_BENCH_COMMON_PROGRESS_H_
#define TOOLS_BENCH_COMMON_PROGRESS_H_

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <string_view>

namespace pm::bench {

class Progress {
 public:
  Progress() : tty_(::isatty(STDERR_FILENO) == 1) {}
  void step(std::string_view what) const {
    if (tty_) fmt::print(stderr, "pm bench: {}\n", what);
  }

 private:
  bool tty_;
};

}  // namespace pm::bench

#endif  // TOOLS_BENCH_COMMON_PROGRESS_H_
