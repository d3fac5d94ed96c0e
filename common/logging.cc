#include "common/logging.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <cstring>

namespace superserve {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<LogSink*> g_sink{nullptr};
}  // namespace

void SetLogSink(LogSink* sink) { g_sink.store(sink); }

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }

void SetLogLevel(const std::string& name) {
  if (name == "debug") SetLogLevel(LogLevel::kDebug);
  else if (name == "warning" || name == "warn") SetLogLevel(LogLevel::kWarning);
  else if (name == "error") SetLogLevel(LogLevel::kError);
  else SetLogLevel(LogLevel::kInfo);
}

LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }

LogLine::LogLine(LogLevel level, const char* file, int line) : level_(level) {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
            1000000;
  std::tm tm;
  localtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%c%02d%02d %02d:%02d:%02d.%06ld ", "DIWE"[static_cast<int>(level)],
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long>(us));
  const char* base = std::strrchr(file, '/');
  ss_ << buf << (base ? base + 1 : file) << ":" << line << "] ";
}

LogLine::~LogLine() {
  ss_ << '\n';
  std::string s = ss_.str();
  if (LogSink* sink = g_sink.load(std::memory_order_acquire)) {
    sink->Write(level_, s);
    return;
  }
  std::fwrite(s.data(), 1, s.size(), stderr);
}

}  // namespace superserve
