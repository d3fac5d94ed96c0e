#include "common/progress.h"

#include <unistd.h>

#include <cstdio>

#include "common/clock.h"

namespace superserve {
namespace {
std::string FormatSeconds(double s) {
  if (s < 0 || s > 1e7) return "?";
  char buf[32];
  int h = static_cast<int>(s / 3600), m = static_cast<int>(s / 60) % 60,
      sec = static_cast<int>(s) % 60;
  if (h > 0) std::snprintf(buf, sizeof(buf), "%dh%02dm%02ds", h, m, sec);
  else std::snprintf(buf, sizeof(buf), "%dm%02ds", m, sec);
  return buf;
}
}  // namespace

ProgressBar::ProgressBar(std::string label, int64_t total, double plain_interval_s)
    : label_(std::move(label)),
      total_(total),
      tty_(isatty(STDERR_FILENO) == 1),
      plain_interval_s_(plain_interval_s),
      start_(RealClock::Get()->Now()) {}

ProgressBar::~ProgressBar() {
  if (!finished_) Finish();
}

void ProgressBar::Set(int64_t done, const std::string& note) {
  done_ = done;
  if (!note.empty()) note_ = note;
  Draw(false);
}

void ProgressBar::Finish(const std::string& note) {
  if (finished_) return;
  if (!note.empty()) note_ = note;
  Draw(true);
  if (tty_) std::fputc('\n', stderr);
  finished_ = true;
}

void ProgressBar::Draw(bool force) {
  Nanos now = RealClock::Get()->Now();
  double since = ToSeconds(now - last_draw_);
  if (!force && since < (tty_ ? 0.1 : plain_interval_s_)) return;
  last_draw_ = now;
  double elapsed = ToSeconds(now - start_);
  double frac = total_ > 0 ? static_cast<double>(done_) / total_ : 0;
  double eta = frac > 0 ? elapsed * (1 - frac) / frac : -1;
  double rate = elapsed > 0 ? done_ / elapsed : 0;
  if (tty_) {
    constexpr int kWidth = 30;
    int fill = static_cast<int>(frac * kWidth);
    std::string bar(fill, '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r%s [%s] %lld/%lld %.0f%% %.1f/s elapsed %s ETA %s %s\033[K",
                 label_.c_str(), bar.c_str(), static_cast<long long>(done_),
                 static_cast<long long>(total_), frac * 100, rate,
                 FormatSeconds(elapsed).c_str(), FormatSeconds(eta).c_str(), note_.c_str());
  } else {
    std::fprintf(stderr, "%s: %lld/%lld (%.0f%%) %.1f/s elapsed %s ETA %s %s\n", label_.c_str(),
                 static_cast<long long>(done_), static_cast<long long>(total_), frac * 100, rate,
                 FormatSeconds(elapsed).c_str(), FormatSeconds(eta).c_str(), note_.c_str());
  }
  std::fflush(stderr);
}

}  // namespace superserve
