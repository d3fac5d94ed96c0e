// ModelLifecycle: a model version from its source to its unload, in one
// place (model_lifecycle.h).
#include "router/model_lifecycle.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/tar_package.h"

namespace superserve {

const char* ModelLifecycle::StateName(State s) {
  switch (s) {
    case State::kLoading: return "loading";
    case State::kServing: return "serving";
    case State::kDraining: return "draining";
    case State::kUnloading: return "unloading";
  }
  return "unknown";
}

ModelLifecycle::ModelLifecycle(Serving serving)
    : serving_(std::move(serving)),
      hot_(HotModels::Hooks{
          // Runs under HotModels' lock (visible and who serves change
          // together); takes this one, then the core's and the versions'.
          // Only a version still loading is served: one its unregister has
          // taken (unloading, gone) is not.
          [this](const ModelProfile& p, const ModelDigest& d, const std::string& name,
                 uint32_t version) {
            std::lock_guard<std::mutex> lock(mu_);
            auto it = states_.find(p.model);
            if (it == states_.end() || it->second.state != State::kLoading) {
              return absl::AbortedError(absl::StrCat("model ", p.model, " was unregistered"));
            }
            if (auto s = serving_.add(p, &d); !s.ok()) return s;
            versions_.Add(name, version, p.model);  // the switch, if newer
            SetLocked(p.model, State::kServing);
            return absl::OkStatus();
          },
          [this](int32_t worker, const std::string& model) {
            return serving_.attach(worker, model);
          }}) {}

void ModelLifecycle::SetLocked(const std::string& internal, std::optional<State> state) {
  if (state.has_value()) {
    states_[internal].state = *state;
  } else {
    states_.erase(internal);
  }
  changed_.notify_all();
}

std::optional<ModelLifecycle::State> ModelLifecycle::StateOf(const std::string& internal) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = states_.find(internal);
  if (it == states_.end()) return std::nullopt;
  return it->second.state;
}

absl::Status ModelLifecycle::AddServing(const ModelProfile& profile, const ModelDigest* digest,
                                        uint32_t version) {
  if (auto s = serving_.add(profile, digest); !s.ok()) return s;
  if (version > 0) versions_.Add(profile.model, version, profile.model);
  std::lock_guard<std::mutex> lock(mu_);
  states_[profile.model] = {State::kServing, profile.model, version};
  changed_.notify_all();
  return absl::OkStatus();
}

absl::Status ModelLifecycle::AddFromRepository(const ModelEntry& entry) {
  // What the profile loader adjusted (dips raised, dominated subnets left
  // out); an unmeasured profile's come once a worker measured it.
  for (const std::string& w : entry.profile.warnings) SS_LOG(WARNING) << w;
  if (!entry.profile.latencies_measured) {
    // The registration path without the wait: the first worker to join
    // loads it, measures the latencies and makes it visible.
    HotModels::Outcome out = Register(entry.directory, entry.name, /*timeout=*/0);
    if (!out.status.ok()) return out.status;
    SS_LOG(INFO) << "model " << entry.name << ": its profile leaves latency_us out; it serves "
                 << "once a worker has loaded it and measured them";
    return absl::OkStatus();
  }
  auto digest = DigestModelDirectory(entry.directory);
  if (!digest.ok()) return digest.status();
  return AddServing(entry.profile, &*digest,
                    entry.manifest.has_value() ? entry.manifest->version : 1);
}

HotModels::Outcome ModelLifecycle::Register(const std::string& path,
                                            const std::string& expected_name, Nanos timeout) {
  HotModels::Outcome out;
  // A .tar package is unpacked into a scratch folder first, removed once the
  // package is in memory (the workers get it from there).
  std::string directory = path;
  std::string scratch;
  if (absl::EndsWith(path, ".tar")) {
    static std::atomic<int64_t> unpacked{0};
    scratch = (std::filesystem::temp_directory_path() /
               absl::StrCat("superserve-router-", getpid(), "-", unpacked.fetch_add(1)))
                  .string();
    auto dir = UnpackTarPackage(path, scratch);
    if (!dir.ok()) {
      std::error_code ec;
      std::filesystem::remove_all(scratch, ec);
      out.status = dir.status();
      return out;
    }
    directory = *dir;
  }
  struct RemoveScratch {
    std::string dir;
    ~RemoveScratch() {
      std::error_code ec;
      if (!dir.empty()) std::filesystem::remove_all(dir, ec);
    }
  } remove_scratch{scratch};
  // Validate.
  auto entry = LoadModelDirectory(directory);
  if (!entry.ok()) {
    out.status = entry.status();
    return out;
  }
  out.model = entry->name;
  for (const std::string& w : entry->profile.warnings) SS_LOG(WARNING) << w;
  if (!expected_name.empty() && expected_name != entry->name) {
    out.status = absl::InvalidArgumentError(absl::StrCat(
        "name \"", expected_name, "\" differs from the package's model \"", entry->name, "\""));
    return out;
  }
  const uint32_t version = entry->manifest.has_value() ? entry->manifest->version : 1;
  auto digest = DigestModelDirectory(entry->directory);
  if (!digest.ok()) {
    out.status = digest.status();
    return out;
  }
  // Decide; then load on the workers and serve once one has it (the add
  // hook).
  std::string internal;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto decided = DecideVersionLocked(entry->name, version);
    if (!decided.ok()) {
      out.status = decided.status();
      return out;
    }
    internal = *decided;
    states_[internal] = {State::kLoading, entry->name, version};
    changed_.notify_all();
  }
  out = hot_.Register(*entry, *digest, internal, version, timeout);
  if (!hot_.Registered(internal)) {  // refused, undone or unregistered meanwhile
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = states_.find(internal);
        it != states_.end() && it->second.state == State::kLoading) {
      SetLocked(internal, std::nullopt);
    }
  }
  return out;
}

absl::StatusOr<std::string> ModelLifecycle::DecideVersion(const std::string& name,
                                                          uint32_t version) const {
  std::lock_guard<std::mutex> lock(mu_);
  return DecideVersionLocked(name, version);
}

absl::StatusOr<std::string> ModelLifecycle::DecideVersionLocked(const std::string& name,
                                                                uint32_t version) const {
  const Entry* newest = nullptr;  // a version recorded as 0 is 1 (no manifest)
  for (const auto& [internal, e] : states_) {
    if (e.name == name &&
        (newest == nullptr || std::max(e.version, 1u) > std::max(newest->version, 1u))) {
      newest = &e;
    }
  }
  if (newest == nullptr) return ModelVersions::InternalName(name, version, /*first=*/true);
  const uint32_t held = std::max(newest->version, 1u);
  if (version <= held) {
    return absl::AlreadyExistsError(absl::StrCat(
        "model ", name, " version ", held, " is ", StateName(newest->state),
        "; a package with a higher manifest version (this one has ", version,
        ") replaces it, or unregister it first"));
  }
  return ModelVersions::InternalName(name, version, /*first=*/false);
}

absl::Status ModelLifecycle::Unregister(const std::string& name, uint32_t version,
                                        Nanos timeout) {
  // Decided under the lock, for every version at once: the served ones
  // drain, those still loading unload. A worker's load reported later finds
  // its version no longer loading and is not served (the add hook).
  std::vector<std::string> drain, unload;
  std::vector<bool> started;  // per drain: this call closes it
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto removed = versions_.Remove(name, version);
    if (removed.ok()) {
      drain = *std::move(removed);
    } else if (removed.status().code() != absl::StatusCode::kNotFound) {
      return removed.status();
    } else if (auto it = states_.find(name);
               version == 0 && it != states_.end() && it->second.state != State::kLoading) {
      drain = {name};  // no versions recorded: served (or draining) under its name
    }
    for (auto& [internal, e] : states_) {
      if (e.name == name && (version == 0 || e.version == version) &&
          e.state == State::kLoading) {
        e.state = State::kUnloading;
        unload.push_back(internal);
      }
    }
    if (drain.empty() && unload.empty()) return removed.status();  // NOT_FOUND
    for (const std::string& internal : drain) {
      auto it = states_.find(internal);
      started.push_back(it != states_.end() && it->second.state == State::kServing);
      if (started.back()) SetLocked(internal, State::kDraining);
    }
    changed_.notify_all();
  }
  for (const std::string& internal : unload) {
    hot_.Unload(internal);
    std::lock_guard<std::mutex> lock(mu_);
    SetLocked(internal, std::nullopt);
  }
  for (size_t i = 0; i < drain.size(); ++i) Drain(drain[i], started[i], timeout);
  return absl::OkStatus();
}

void ModelLifecycle::Drain(const std::string& internal, bool close, Nanos timeout) {
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  if (!close) {  // another unregister's: it removes it
    lock.lock();
    changed_.wait(lock, [&] { return states_.count(internal) == 0; });
    return;
  }
  const bool served =
      serving_.close(internal, [this, internal] { OnDrained(internal); }).ok();
  // Wait for the drained event, at most `timeout`.
  lock.lock();
  const bool drained = !served || changed_.wait_for(
      lock, std::chrono::nanoseconds(std::max<Nanos>(0, timeout)), [&] {
        auto it = states_.find(internal);
        return it == states_.end() || it->second.state != State::kDraining;
      });
  SetLocked(internal, State::kUnloading);
  lock.unlock();
  if (!drained) {
    SS_LOG(WARNING) << "model " << internal << " not drained within " << ToSeconds(timeout)
                    << " s; what is left is answered UNAVAILABLE";
  }
  if (auto s = serving_.remove(internal); !s.ok() && served) {
    SS_LOG(WARNING) << "model " << internal << " drained, but removing it: " << s;
  }
  hot_.Unload(internal);
  lock.lock();
  SetLocked(internal, std::nullopt);
}

void ModelLifecycle::OnDrained(const std::string& internal) {
  // Decides only: the core may report from within any call into it, under
  // HotModels' lock too (a worker's attach); Drain's thread acts.
  std::lock_guard<std::mutex> lock(mu_);
  auto it = states_.find(internal);
  if (it != states_.end() && it->second.state == State::kDraining) {
    SetLocked(internal, State::kUnloading);
  }
}

void ModelLifecycle::OnWorkerRegistered(int32_t worker, std::string name,
                                        const std::vector<std::string>& declared,
                                        std::shared_ptr<WorkerConnection> connection,
                                        bool stores_packages) {
  hot_.OnWorkerRegistered(worker, name, declared, connection);
  if (!stores_packages) return;
  // Checked once the worker is among HotModels' live ones, and sent under
  // the lock: an unregistration racing this one either reaches the worker
  // there or leaves its version unloading or gone here; a registration of
  // the name sets kLoading under this lock before its LoadModel goes out.
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& model : declared) {
    auto it = states_.find(model);
    if (it != states_.end() && it->second.state != State::kUnloading) continue;
    SS_LOG(INFO) << "worker " << name << " declares model " << model
                 << ", not served here: it is told to free it";
    auto msg = std::make_unique<v1::RouterMessage>();
    msg->mutable_unload_model()->set_model(model);
    connection->Send(std::move(msg));
  }
}

void ModelLifecycle::OnWorkerGone(int32_t worker) { hot_.OnWorkerGone(worker); }

void ModelLifecycle::OnModelLoaded(int32_t worker, const v1::ModelLoaded& loaded) {
  hot_.OnModelLoaded(worker, loaded);
}

void ModelLifecycle::Shutdown() { hot_.Shutdown(); }

}  // namespace superserve
