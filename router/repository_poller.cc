#include "router/repository_poller.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace superserve {

namespace fs = std::filesystem;

RepositoryPoller::RepositoryPoller(std::string repo, Actions actions)
    : repo_(std::move(repo)), actions_(std::move(actions)) {}

RepositoryPoller::~RepositoryPoller() { Stop(); }

std::string RepositoryPoller::Fingerprint(const std::string& directory) {
  std::vector<std::string> parts;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(directory, ec)) {
    std::error_code fe;
    const auto size = f.is_regular_file(fe) ? f.file_size(fe) : 0;
    const auto mtime = f.last_write_time(fe).time_since_epoch().count();
    std::string part = absl::StrCat(f.path().filename().string(), ":", size, ":", mtime);
    // Small files (manifest, profile) by content too: an edit within the
    // file system's timestamp granularity that keeps the size still shows.
    if (size > 0 && size <= (1u << 20)) {
      std::ifstream in(f.path(), std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      absl::StrAppend(&part, ":", std::hash<std::string>{}(ss.str()));
    }
    parts.push_back(std::move(part));
  }
  std::sort(parts.begin(), parts.end());
  std::string out;
  for (const auto& p : parts) absl::StrAppend(&out, p, ";");
  return out;
}

void RepositoryPoller::Adopt(const std::vector<ModelEntry>& served) {
  for (const ModelEntry& m : served) {
    Known k;
    k.fingerprint = Fingerprint(m.directory);
    k.registered = true;
    known_[fs::path(m.directory).filename().string()] = k;
  }
}

std::vector<std::string> RepositoryPoller::PollOnce() {
  std::vector<std::string> report;
  std::set<std::string> seen;
  std::error_code ec;
  std::vector<fs::path> dirs;
  for (const auto& d : fs::directory_iterator(repo_, ec)) {
    // An entry that cannot be followed (a symlink loop) is not a package.
    std::error_code de;
    if (d.is_directory(de) && (fs::exists(d.path() / "profile.json", de) ||
                               fs::exists(d.path() / "manifest.json", de))) {
      dirs.push_back(d.path());
    }
  }
  if (ec) {
    // An unreadable repository unregisters nothing: that is not a deletion.
    report.push_back(absl::StrCat("cannot scan ", repo_, ": ", ec.message()));
    return report;
  }
  std::sort(dirs.begin(), dirs.end());
  for (const fs::path& dir : dirs) {
    const std::string name = dir.filename().string();
    seen.insert(name);
    const std::string fingerprint = Fingerprint(dir.string());
    auto it = known_.find(name);
    if (it != known_.end() && it->second.fingerprint == fingerprint) continue;
    // Whether the package is valid and newer than what is held is the
    // lifecycle's to decide (ModelLifecycle::DecideVersion), as for
    // superserve-admin.
    Known next = it != known_.end() ? it->second : Known{};
    next.fingerprint = fingerprint;
    absl::Status s = actions_.register_package(dir.string(), name);
    if (s.ok()) {
      next.registered = true;
      report.push_back(absl::StrCat("registered ", name));
    } else {
      report.push_back(absl::StrCat(name, ": ", s.message(), " (not registered)"));
    }
    known_[name] = next;
  }
  for (auto it = known_.begin(); it != known_.end();) {
    if (seen.count(it->first) > 0) {
      ++it;
      continue;
    }
    if (it->second.registered) {
      absl::Status s = actions_.unregister_model(it->first);
      report.push_back(s.ok() ? absl::StrCat("unregistered ", it->first)
                              : absl::StrCat(it->first, ": folder removed, unregistering failed: ",
                                             s.message()));
    }
    it = known_.erase(it);
  }
  return report;
}

void RepositoryPoller::Start(Nanos interval) {
  Stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this, interval] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::nanoseconds(interval), [this] { return stopping_; })) {
      lock.unlock();
      for (const std::string& line : PollOnce()) {
        SS_LOG(INFO) << "repository poll (" << repo_ << "): " << line;
      }
      lock.lock();
    }
  });
}

void RepositoryPoller::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace superserve
