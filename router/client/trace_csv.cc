#include "router/client/trace_csv.h"

#include <cmath>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/trace_columns.h"

namespace superserve {

absl::StatusOr<std::vector<TraceArrival>> ReadTraceCsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("trace ", path, ": cannot open"));
  std::string line;
  int arrival_col = -1, slo_col = -1, app_col = -1, model_col = -1;
  std::string slo_name;  // as the header spells it
  int line_no = 0;
  std::vector<TraceArrival> out;
  bool have_header = false;
  while (std::getline(in, line)) {
    ++line_no;
    absl::string_view l = line;
    // A UTF-8 byte order mark (spreadsheet exports write one) is not part of
    // the first column's name.
    if (line_no == 1) absl::ConsumePrefix(&l, "\xEF\xBB\xBF");
    l = absl::StripAsciiWhitespace(l);
    if (l.empty() || l[0] == '#') continue;
    std::vector<absl::string_view> cols = absl::StrSplit(l, ',');
    if (!have_header) {
      for (int i = 0; i < static_cast<int>(cols.size()); ++i) {
        absl::string_view c = absl::StripAsciiWhitespace(cols[i]);
        if (c == kTraceArrivalColumn) arrival_col = i;
        if (c == "slo_us" || c == "deadline_us") {
          slo_col = i;
          slo_name = std::string(c);
        }
        if (IsTraceApplicationColumn(c)) app_col = i;
        if (c == kTraceModelColumn) model_col = i;
      }
      if (arrival_col < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("trace ", path, ": header has no arrival_us column: ", l));
      }
      have_header = true;
      continue;
    }
    auto field = [&](int col) -> absl::string_view {
      return col >= 0 && col < static_cast<int>(cols.size()) ? absl::StripAsciiWhitespace(cols[col])
                                                             : absl::string_view();
    };
    TraceArrival a;
    double us;
    // SimpleAtod takes "inf", "nan" and 1e300: the replay would wait for
    // ever on them, and a time past int64 nanoseconds wraps.
    if (!absl::SimpleAtod(field(arrival_col), &us) || !std::isfinite(us) || us < 0 ||
        us > kMaxTraceArrivalUs) {
      return absl::InvalidArgumentError(
          absl::StrCat("trace ", path, ":", line_no, ": bad arrival_us \"", field(arrival_col),
                       "\" (must be a number of microseconds in [0, ", kMaxTraceArrivalUs, "])"));
    }
    a.arrival = Micros(us);
    if (!out.empty() && a.arrival < out.back().arrival) {
      return absl::InvalidArgumentError(
          absl::StrCat("trace ", path, ":", line_no, ": arrival_us goes backwards"));
    }
    if (slo_col >= 0 && !field(slo_col).empty()) {
      // Beyond a day the router clamps the deadline anyway; past int64
      // nanoseconds the SLO wrapped negative and every answer was "late".
      constexpr int64_t kMaxSloUs = kMaxQueryTimeout / kNanosPerMicro;
      if (!absl::SimpleAtod(field(slo_col), &us) || !std::isfinite(us) || us <= 0 ||
          us > static_cast<double>(kMaxSloUs)) {
        return absl::InvalidArgumentError(
            absl::StrCat("trace ", path, ":", line_no, ": bad ", slo_name, " \"", field(slo_col),
                         "\" (must be a number of microseconds in (0, ", kMaxSloUs,
                         "], a day: the router's bound on a query's deadline)"));
      }
      a.slo = Micros(us);
    }
    if (app_col >= 0) a.application = std::string(field(app_col));
    if (model_col >= 0) a.model = std::string(field(model_col));
    out.push_back(std::move(a));
  }
  if (!have_header) return absl::InvalidArgumentError(absl::StrCat("trace ", path, ": empty"));
  return out;
}

}  // namespace superserve
