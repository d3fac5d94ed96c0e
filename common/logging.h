#ifndef SUPERSERVE_COMMON_LOGGING_H_
#define SUPERSERVE_COMMON_LOGGING_H_

#include <sstream>
#include <string>

namespace superserve {

// The project's one logging facility: leveled lines on stderr,
// "I1122 03:04:05.678901 router.cc:42] message". Thread-safe (one write per
// line).
enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

void SetLogLevel(const std::string& name);
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();

// Where lines go instead of stderr while set (tests: what was logged, and
// from where); null: stderr. Not owned; set it before logging starts.
class LogSink {
 public:
  virtual ~LogSink() = default;
  virtual void Write(LogLevel level, const std::string& line) = 0;
};
void SetLogSink(LogSink* sink);

class LogLine {
 public:
  LogLine(LogLevel level, const char* file, int line);
  ~LogLine();
  std::ostream& stream() { return ss_; }

 private:
  LogLevel level_;
  std::ostringstream ss_;
};

}  // namespace superserve

#define SS_LOG_DEBUG ::superserve::LogLevel::kDebug
#define SS_LOG_INFO ::superserve::LogLevel::kInfo
#define SS_LOG_WARNING ::superserve::LogLevel::kWarning
#define SS_LOG_ERROR ::superserve::LogLevel::kError

#define SS_LOG(level)                                   \
  if (SS_LOG_##level < ::superserve::GetLogLevel()) {   \
  } else                                                \
    ::superserve::LogLine(SS_LOG_##level, __FILE__, __LINE__).stream()

#endif  // SUPERSERVE_COMMON_LOGGING_H_
