#include "bench/kv/kv_plot.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace pm::bench {

namespace {

// gnuplot single-quoted string: a quote is written twice.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// One panel: rows of put ratios, one column per engine, Mops/s.
std::string panel(const KvRun& run, KeyChoice choice, int threads, int index) {
  std::string s = fmt::format("$d{} << EOD\nput%", index);
  for (const EngineRun& e : run.engines) s += " " + e.name;
  s += "\n";
  const std::vector<CellResult>& cells = run.engines.front().cells;
  for (size_t i = 0; i < cells.size(); i++) {
    if (cells[i].spec.choice != choice || cells[i].spec.threads != threads) continue;
    s += fmt::format("{}", cells[i].spec.put_percent);
    for (const EngineRun& e : run.engines)
      s += fmt::format(" {:.6g}", e.cells[i].ops_per_s() / 1e6);
    s += "\n";
  }
  s += "EOD\n";
  s += fmt::format("set title \"{}, {} thread{}\"\n", key_choice_name(choice), threads,
                   threads == 1 ? "" : "s");
  s += fmt::format(
      "plot for [c=2:{}] $d{} using 0:c:xtic(1) with linespoints lw 2 pt 7 title columnheader(c)\n",
      run.engines.size() + 1, index);
  return s;
}

std::string script(const KvRun& run, const KvConfig& cfg, const std::string& path) {
  std::string s = "set terminal pngcairo size 1400,1000 font ',10'\n";
  s += "set output " + quoted(path) + "\n";
  std::string title = fmt::format("pm bench kv: throughput vs put ratio ({} keys, {:g} s per cell)",
                                  cfg.keys, cfg.seconds);
  if (cfg.emulated()) {
    title +=
        fmt::format("\\nEMULATED slower PM (phash, kvstore): +{} ns per persist, +{} ns per read",
                    cfg.emulate_persist_ns, cfg.emulate_read_ns);
  }
  const size_t rows = 2, cols = cfg.thread_counts.size();
  s += fmt::format("set multiplot layout {},{} title \"{}\"\n", rows, cols, title);
  s += "set logscale y\nset ylabel 'Mops/s'\nset xlabel 'put %'\nset grid\n";
  s += "set key outside right\nset datafile missing 'nan'\n";
  int index = 0;
  for (KeyChoice c : {KeyChoice::kZipfian, KeyChoice::kUniform}) {
    for (int t : cfg.thread_counts) s += panel(run, c, t, index++);
  }
  s += "unset multiplot\n";
  return s;
}

}  // namespace

bool have_gnuplot() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (!dir.empty() && ::access((dir + "/gnuplot").c_str(), X_OK) == 0) return true;
  }
  return false;
}

Status write_plot(const KvRun& run, const KvConfig& cfg, const std::string& path) {
  if (run.engines.empty()) return Status::invalid_argument("plot: no engine ran");
  std::FILE* gp = ::popen("gnuplot", "w");
  if (gp == nullptr) return Status::from_errno("plot: start gnuplot", errno);
  const std::string s = script(run, cfg, path);
  const bool written = std::fwrite(s.data(), 1, s.size(), gp) == s.size();
  const int status = ::pclose(gp);
  if (!written || status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::io_error(fmt::format("plot {}: gnuplot failed (see its message above)", path));
  }
  return Status();
}

}  // namespace pm::bench
