#include "bench/sim/trace.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/trace_columns.h"

namespace superserve {

double Trace::mean_rate() const {
  if (arrivals.size() < 2 || duration() <= 0) return 0;
  return static_cast<double>(arrivals.size()) / ToSeconds(duration());
}

double InterArrivalCv2(const std::vector<Nanos>& a) {
  if (a.size() < 3) return 0;
  double sum = 0, sum2 = 0;
  const double n = static_cast<double>(a.size() - 1);
  for (size_t i = 1; i < a.size(); ++i) {
    double d = static_cast<double>(a[i] - a[i - 1]);
    sum += d;
    sum2 += d * d;
  }
  double mean = sum / n;
  double var = sum2 / n - mean * mean;
  return mean > 0 ? var / (mean * mean) : 0;
}

namespace {

std::string_view Strip(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// Plain comma split (trace files carry no quoted fields).
void SplitCsv(std::string_view line, std::vector<std::string_view>* cells) {
  cells->clear();
  size_t start = 0;
  while (true) {
    size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      cells->push_back(line.substr(start));
      return;
    }
    cells->push_back(line.substr(start, comma - start));
    start = comma + 1;
  }
}

int32_t Intern(std::string_view name, std::vector<std::string>* names,
               std::map<std::string, int32_t, std::less<>>* index) {
  auto it = index->find(name);
  if (it != index->end()) return it->second;
  int32_t id = static_cast<int32_t>(names->size());
  names->emplace_back(name);
  index->emplace(std::string(name), id);
  return id;
}

}  // namespace

absl::StatusOr<Trace> Trace::ReadCsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("trace ", path, ": cannot open"));
  std::string line;
  if (!std::getline(in, line)) {
    return absl::InvalidArgumentError(absl::StrCat("trace ", path, ": empty file"));
  }
  // A UTF-8 byte order mark (spreadsheet exports write one) is not part of
  // the first column's name.
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (std::string_view(line).substr(0, kBom.size()) == kBom) line.erase(0, kBom.size());
  std::vector<std::string_view> header;
  SplitCsv(Strip(line), &header);
  const std::string header_line = line;
  int col_arrival = -1, col_app = -1, col_model = -1;
  std::string app_name;  // as the header spells it
  for (int i = 0; i < static_cast<int>(header.size()); ++i) {
    std::string_view h = Strip(header[i]);
    if (h == kTraceArrivalColumn) col_arrival = i;
    if (IsTraceApplicationColumn(absl::string_view(h.data(), h.size()))) {
      col_app = i;
      app_name = std::string(h);
    }
    if (h == kTraceModelColumn) col_model = i;
  }
  if (col_arrival < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("trace ", path, ": header has no arrival_us column: \"", header_line, "\""));
  }
  Trace t;
  std::map<std::string, int32_t, std::less<>> apps, models;
  int64_t row = 1;
  const size_t num_columns = header.size();
  std::vector<std::string_view> cells;
  while (std::getline(in, line)) {
    ++row;
    if (line.empty() || line == "\r") continue;
    SplitCsv(line, &cells);
    if (static_cast<int>(cells.size()) <= std::max({col_arrival, col_app, col_model})) {
      return absl::InvalidArgumentError(
          absl::StrCat("trace ", path, " line ", row, ": expected ", num_columns, " columns"));
    }
    std::string cell(Strip(cells[col_arrival]));
    char* end = nullptr;
    errno = 0;
    double us = std::strtod(cell.c_str(), &end);
    // Beyond kMaxArrivalUs llround's result would be unspecified.
    // `end` must reach the cell's end, not just a NUL byte inside it.
    if (errno != 0 || end == cell.c_str() || end != cell.c_str() + cell.size() ||
        !std::isfinite(us) || us < 0 || us > kMaxArrivalUs) {
      return absl::InvalidArgumentError(absl::StrCat("trace ", path, " line ", row,
                                                     ": bad arrival_us \"", cell, "\""));
    }
    Nanos ns = static_cast<Nanos>(std::llround(us * kNanosPerMicro));
    if (!t.arrivals.empty() && ns < t.arrivals.back()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "trace ", path, " line ", row, ": arrival_us goes back in time (rows must be sorted)"));
    }
    // Names are written back with C strings (and used as model names): a NUL
    // byte in one would silently cut it.
    for (int col : {col_app, col_model}) {
      if (col >= 0 && cells[col].find('\0') != std::string_view::npos) {
        return absl::InvalidArgumentError(absl::StrCat("trace ", path, " line ", row, ": column ",
                                                       col == col_app ? app_name : "model",
                                                       " contains a NUL byte"));
      }
    }
    t.arrivals.push_back(ns);
    if (col_app >= 0) {
      t.app.push_back(Intern(Strip(cells[col_app]), &t.app_names, &apps));
    }
    if (col_model >= 0) {
      t.model.push_back(
          Intern(Strip(cells[col_model]), &t.model_names, &models));
    }
  }
  return t;
}

absl::StatusOr<std::vector<double>> ReadExecTimes(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--exec_times ", path, ": cannot open"));
  constexpr double kMaxUs = ToMicros(kMaxQueryTimeout);
  std::vector<double> out;
  std::string line;
  int64_t row = 0;
  while (std::getline(in, line)) {
    ++row;
    const std::string cell(Strip(line));
    if (cell.empty()) continue;
    char* end = nullptr;
    // Out of double's range reads as inf (or 0), which the range check
    // below answers.
    const double us = std::strtod(cell.c_str(), &end);
    if (end == cell.c_str() || end != cell.c_str() + cell.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--exec_times ", path, " line ", row, ": not a number: \"", cell, "\""));
    }
    if (!(us >= 0 && us <= kMaxUs)) {
      return absl::InvalidArgumentError(absl::StrCat("--exec_times ", path, " line ", row, ": ",
                                                     cell, " us is outside [0, ", kMaxUs,
                                                     "] us (0 to a day)"));
    }
    out.push_back(us);
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--exec_times ", path, ": no execution times (one value in us per line)"));
  }
  return out;
}

absl::Status Trace::WriteCsv(const std::string& path) const {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return absl::InternalError(absl::StrCat("trace ", path, ": cannot write"));
  std::fputs("arrival_us", f);
  if (!app.empty()) std::fputs(",app", f);
  if (!model.empty()) std::fputs(",model", f);
  std::fputc('\n', f);
  for (size_t i = 0; i < arrivals.size(); ++i) {
    // Microseconds with nanosecond precision.
    std::fprintf(f, "%lld.%03lld", static_cast<long long>(arrivals[i] / kNanosPerMicro),
                 static_cast<long long>(arrivals[i] % kNanosPerMicro));
    if (!app.empty()) std::fprintf(f, ",%s", app_names[app[i]].c_str());
    if (!model.empty()) std::fprintf(f, ",%s", model_names[model[i]].c_str());
    std::fputc('\n', f);
  }
  if (std::fclose(f) != 0) {
    return absl::InternalError(absl::StrCat("trace ", path, ": write failed"));
  }
  return absl::OkStatus();
}

}  // namespace superserve
