#include "bench/common/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace pm::bench {

double percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  auto rank = static_cast<size_t>(std::ceil(p / 100.0 * double(samples.size())));
  return samples[std::clamp<size_t>(rank, 1, samples.size()) - 1];
}

Cell ratio(double a, double b) {
  if (!(a > 0) || !(b > 0)) return std::monostate{};
  return a / b;
}

namespace {

std::string format_rate(double v) {
  if (v >= 1e6) return fmt::format("{:.2f} M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f} k", v / 1e3);
  return fmt::format("{:.1f}", v);
}

std::string format_number(double v, Format f) {
  switch (f) {
    case Format::kCount:
      return fmt::format("{:.0f}", v);
    case Format::kMicros:
      return fmt::format("{:.2f}", v);
    case Format::kMillis:
      return fmt::format("{:.2f}", v);
    case Format::kRate:
      return format_rate(v);
    case Format::kRatio:
      return fmt::format("{:.2f}x", v);
    case Format::kMiB:
      return fmt::format("{:.1f}", v);
    case Format::kText:
      break;
  }
  return fmt::format("{}", v);
}

std::string format_cell(const Cell& c, Format f) {
  if (std::holds_alternative<std::monostate>(c)) return "-";
  if (const auto* s = std::get_if<std::string>(&c)) return *s;
  if (const auto* i = std::get_if<int64_t>(&c)) {
    return f == Format::kCount || f == Format::kText ? std::to_string(*i)
                                                     : format_number(double(*i), f);
  }
  return format_number(std::get<double>(c), f);
}

nlohmann::json cell_json(const Cell& c) {
  if (const auto* s = std::get_if<std::string>(&c)) return *s;
  if (const auto* i = std::get_if<int64_t>(&c)) return *i;
  if (const auto* d = std::get_if<double>(&c)) return *d;
  return nullptr;
}

}  // namespace

void print_table(const Table& t) {
  const size_t ncol = t.columns.size();
  std::vector<std::vector<std::string>> text;
  std::vector<size_t> width(ncol);
  for (size_t c = 0; c < ncol; c++) width[c] = t.columns[c].title.size();
  for (const auto& row : t.rows) {
    std::vector<std::string>& line = text.emplace_back();
    for (size_t c = 0; c < ncol; c++) {
      line.push_back(c < row.size() ? format_cell(row[c], t.columns[c].format) : "-");
      width[c] = std::max(width[c], line.back().size());
    }
  }
  // Text columns align left, numbers right, so that digits line up.
  auto cell = [&](size_t c, const std::string& s) {
    bool left = t.columns[c].format == Format::kText;
    return left ? fmt::format("{:<{}}", s, width[c]) : fmt::format("{:>{}}", s, width[c]);
  };
  fmt::print("\n{}\n", t.title);
  std::string header, rule;
  for (size_t c = 0; c < ncol; c++) {
    header += "  " + cell(c, t.columns[c].title);
    rule += "  " + std::string(width[c], '-');
  }
  fmt::print("{}\n{}\n", header, rule);
  for (const auto& line : text) {
    std::string out;
    for (size_t c = 0; c < ncol; c++) out += "  " + cell(c, line[c]);
    fmt::print("{}\n", out);
  }
  for (const std::string& n : t.notes) fmt::print("  note: {}\n", n);
}

nlohmann::json table_json(const Table& t) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : t.rows) {
    nlohmann::json r = nlohmann::json::object();
    for (size_t c = 0; c < t.columns.size(); c++) {
      r[t.columns[c].key] = c < row.size() ? cell_json(row[c]) : nullptr;
    }
    rows.push_back(std::move(r));
  }
  return {{"title", t.title}, {"rows", rows}, {"notes", t.notes}};
}

namespace {

std::string with_unit(double v, const std::string& unit) {
  return unit == "x" ? fmt::format("{:g}x", v) : fmt::format("{:g} {}", v, unit);
}

}  // namespace

Target Target::at_most_of(std::string name, double threshold, std::string unit) {
  Target t;
  t.name = std::move(name);
  t.goal = "<= " + with_unit(threshold, unit);
  t.unit = std::move(unit);
  t.threshold = threshold;
  t.at_most = true;
  return t;
}

Target Target::at_least_of(std::string name, double threshold, std::string unit) {
  Target t = at_most_of(std::move(name), threshold, std::move(unit));
  t.goal = ">= " + with_unit(threshold, t.unit);
  t.at_most = false;
  return t;
}

std::string Target::verdict() const {
  if (!available) return "n/a (did not run)";
  if (!not_applicable.empty()) return "n/a (" + not_applicable + ")";
  return met() ? "met" : "not met";
}

nlohmann::json target_json(const Target& t) {
  return {{"name", t.name},
          {"goal", t.goal},
          {"measured", t.available ? nlohmann::json(t.measured) : nlohmann::json(nullptr)},
          {"unit", t.unit},
          {"threshold", t.threshold},
          {"at_most", t.at_most},
          {"verdict", t.verdict()}};
}

Table targets_table(const std::vector<Target>& targets) {
  Table t;
  t.title = "targets (from the project issue; verdicts computed from the numbers above)";
  t.columns = {
      {"target", "target"}, {"goal", "goal"}, {"measured", "measured"}, {"verdict", "verdict"}};
  for (const Target& g : targets) {
    const char* sep = g.unit == "x" ? "" : " ";
    t.add_row({g.name, g.goal,
               g.available ? Cell(fmt::format("{:.2f}{}{}", g.measured, sep, g.unit)) : Cell(),
               g.verdict()});
  }
  return t;
}

}  // namespace pm::bench
