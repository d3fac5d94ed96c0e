#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/clock.h"

namespace superserve {

absl::StatusOr<Subprocess> Subprocess::Start(const std::vector<std::string>& argv,
                                             const std::string& log_path) {
  if (argv.empty()) return absl::InvalidArgumentError("Subprocess: empty argv");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // parent died before prctl
    if (!log_path.empty()) {
      int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
      }
    }
    execv(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  Subprocess p;
  p.pid_ = pid;
  return p;
}

Subprocess::Subprocess(Subprocess&& o) noexcept : pid_(o.pid_), status_(o.status_) {
  o.pid_ = -1;
}

Subprocess& Subprocess::operator=(Subprocess&& o) noexcept {
  if (this != &o) {
    if (pid_ > 0 && !status_) Stop();
    pid_ = o.pid_;
    status_ = o.status_;
    o.pid_ = -1;
  }
  return *this;
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !status_) Stop(Seconds(2));
}

bool Subprocess::running() {
  if (pid_ <= 0 || status_) return false;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = st;
    return false;
  }
  return true;
}

void Subprocess::Kill(int signal) {
  if (running()) ::kill(pid_, signal);
}

std::optional<int> Subprocess::Wait(Nanos timeout) {
  if (pid_ <= 0) return std::nullopt;
  Nanos end = RealClock::Get()->Now() + timeout;
  while (running()) {
    if (RealClock::Get()->Now() >= end) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return status_;
}

int Subprocess::Stop(Nanos grace) {
  if (pid_ <= 0) return -1;
  if (running()) {
    ::kill(pid_, SIGTERM);
    if (!Wait(grace)) {
      ::kill(pid_, SIGKILL);
      Wait(Seconds(10));
    }
  }
  return status_.value_or(-1);
}

absl::StatusOr<std::string> WaitForFile(const std::string& path, Nanos timeout,
                                        Subprocess* child) {
  Nanos end = RealClock::Get()->Now() + timeout;
  while (true) {
    std::ifstream in(path);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      std::string s = ss.str();
      // Writers finish the file with a newline; a partial write is not ready.
      if (!s.empty() && s.back() == '\n') return s;
    }
    if (child != nullptr && !child->running()) {
      return absl::UnavailableError(absl::StrCat("child exited before writing ", path));
    }
    if (RealClock::Get()->Now() >= end) {
      return absl::DeadlineExceededError(absl::StrCat("timed out waiting for ", path));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace superserve
