// Report: the tables `pm bench` prints, the same data as JSON, the
// percentile helper the suites summarise timings with, and the targets
// ("met"/"not met") judged from measured numbers only.
//
// Thread safety: plain values; use from one thread.
#ifndef TOOLS_BENCH_COMMON_REPORT_H_
#define TOOLS_BENCH_COMMON_REPORT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

namespace pm::bench {

// The value at percentile p (0..100) by nearest rank; 0 for no samples.
double percentile(std::vector<double> samples, double p);
inline double median(std::vector<double> samples) { return percentile(std::move(samples), 50); }

// How a column's numbers are shown in text; JSON always gets the raw number.
enum class Format { kText, kCount, kMicros, kMillis, kRate, kRatio, kMiB };

struct Column {
  std::string title;  // table header
  std::string key;    // JSON member name
  Format format = Format::kText;
};

// Missing value (std::monostate) prints as "-" and as JSON null.
using Cell = std::variant<std::monostate, int64_t, double, std::string>;

struct Table {
  std::string title;
  std::vector<Column> columns;
  std::vector<std::vector<Cell>> rows;
  std::vector<std::string> notes;  // printed under the table, kept in JSON

  void add_row(std::vector<Cell> row) { rows.push_back(std::move(row)); }
};

// a / b when both are positive, else a missing cell.
Cell ratio(double a, double b);

void print_table(const Table& t);
nlohmann::json table_json(const Table& t);

// A goal from the project issue, judged against one measurement.
struct Target {
  std::string name;  // "small commit (uffd), median"
  std::string goal;  // "<= 10 us"
  double measured = 0;
  std::string unit;  // "us", "x", "ms"
  double threshold = 0;
  bool at_most = true;         // met when measured <= threshold; else >=
  bool available = true;       // false: the measurement did not run
  std::string not_applicable;  // non-empty: measured, but the goal is for other conditions

  // A goal met when measured <= threshold (at most) or >= threshold (at least).
  static Target at_most_of(std::string name, double threshold, std::string unit);
  static Target at_least_of(std::string name, double threshold, std::string unit);

  bool met() const {
    return available && (at_most ? measured <= threshold : measured >= threshold);
  }
  // "met", "not met", or "n/a (why)".
  std::string verdict() const;
};

nlohmann::json target_json(const Target& t);

// The targets as one table: name, goal, measured value with its unit, verdict.
Table targets_table(const std::vector<Target>& targets);

// What one suite produced in one directory.
struct SuiteResult {
  std::vector<Table> tables;
  std::vector<Target> targets;
};

}  // namespace pm::bench

#endif  // TOOLS_BENCH_COMMON_REPORT_H_
