#include "router/hot_models.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"

namespace superserve {
namespace {

namespace fs = std::filesystem;

// The package's regular files (not recursive: a package is one flat folder).
absl::Status ReadPackage(const std::string& directory, v1::LoadModel* load) {
  std::error_code ec;
  int64_t total = 0;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(directory, ec)) {
    std::error_code fe;
    if (e.is_regular_file(fe)) files.push_back(e.path());
  }
  if (ec) return absl::NotFoundError(absl::StrCat("cannot list ", directory, ": ", ec.message()));
  std::sort(files.begin(), files.end());
  for (const fs::path& p : files) {
    const auto size = fs::file_size(p, ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot stat ", p.string(), ": ", ec.message()));
    total += static_cast<int64_t>(size);
    if (total > HotModels::kMaxPackageBytes) {
      return absl::FailedPreconditionError(absl::StrCat(
          "model package ", directory, " is larger than ", HotModels::kMaxPackageBytes >> 20,
          " MiB, the most a worker stream carries; give the workers the package in their "
          "--model_repo and register it from there"));
    }
    std::ifstream in(p, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    if (!in) return absl::InternalError(absl::StrCat("cannot read ", p.string()));
    auto* f = load->add_files();
    f->set_name(p.filename().string());
    f->set_content(bytes.str());
  }
  return absl::OkStatus();
}

}  // namespace

HotModels::Outcome HotModels::Register(const ModelEntry& entry, const ModelDigest& digest,
                                       const std::string& serve_as, uint32_t version,
                                       Nanos timeout) {
  Outcome out;
  out.model = serve_as;
  auto msg = std::make_shared<v1::RouterMessage>();
  v1::LoadModel* load = msg->mutable_load_model();
  load->set_model(entry.name);
  if (serve_as != entry.name) load->set_serve_as(serve_as);
  load->mutable_version()->set_model(entry.name);
  load->mutable_version()->set_profile_digest(digest.profile);
  load->mutable_version()->set_checkpoint_digest(digest.checkpoint);
  if (auto s = ReadPackage(entry.directory, load); !s.ok()) {
    out.status = s;
    return out;
  }
  std::vector<std::shared_ptr<WorkerConnection>> send;
  std::unique_lock<std::mutex> lock(mu_);
  if (shut_down_) {
    out.status = absl::UnavailableError("shutting down");
    return out;
  }
  if (models_.count(serve_as) > 0) {
    out.status = absl::AlreadyExistsError(
        absl::StrCat("model ", serve_as, " is already registered (unregister it first)"));
    return out;
  }
  Model& m = models_[serve_as];
  m.name = entry.name;
  m.version = version;
  m.profile = entry.profile;
  m.profile.model = serve_as;
  m.digest = digest;
  m.load = msg;
  for (const auto& [id, w] : workers_) {
    m.asked[id].worker = w.name;
    send.push_back(w.connection);
  }
  lock.unlock();
  for (const auto& c : send) c->Send(std::make_unique<v1::RouterMessage>(*msg));
  lock.lock();
  // With no worker connected yet, the first one to register is sent the
  // package (OnWorkerRegistered) and this waits for its answer too.
  settled_.wait_for(lock, std::chrono::nanoseconds(timeout),
                    [&] { return shut_down_ || SettledLocked(serve_as); });
  auto it = models_.find(serve_as);
  if (it == models_.end()) {  // unregistered meanwhile
    out.status = absl::AbortedError(absl::StrCat("model ", serve_as, " was unregistered"));
    return out;
  }
  std::vector<std::string> failures;
  int32_t loading = 0;
  for (const auto& [id, w] : it->second.asked) {
    out.workers.push_back(w);
    if (!w.error.empty()) failures.push_back(absl::StrCat(w.worker, ": ", w.error));
    if (!w.ready && w.error.empty()) ++loading;
  }
  out.visible = it->second.visible;
  if (!out.visible && shut_down_) {
    out.status = absl::UnavailableError("shutting down");
  } else if (!out.visible && !it->second.asked.empty() && loading == 0) {
    out.status = absl::FailedPreconditionError(absl::StrCat(
        "no worker loaded model ", serve_as, ": ", absl::StrJoin(failures, "; ")));
    models_.erase(it);
  }
  return out;
}

bool HotModels::SettledLocked(const std::string& model) const {
  auto it = models_.find(model);
  if (it == models_.end() || it->second.visible) return true;
  if (it->second.asked.empty()) return false;  // wait for a worker to join
  for (const auto& [id, w] : it->second.asked) {
    if (w.error.empty()) return false;  // still loading (a ready one made it visible)
  }
  return true;  // every worker asked failed
}

void HotModels::Unload(const std::string& model) {
  std::vector<std::shared_ptr<WorkerConnection>> send;
  {
    std::lock_guard<std::mutex> lock(mu_);
    models_.erase(model);
    for (const auto& [id, w] : workers_) send.push_back(w.connection);
  }
  settled_.notify_all();
  for (const auto& c : send) {
    auto msg = std::make_unique<v1::RouterMessage>();
    msg->mutable_unload_model()->set_model(model);
    c->Send(std::move(msg));
  }
}

bool HotModels::Registered(const std::string& model) const {
  std::lock_guard<std::mutex> lock(mu_);
  return models_.count(model) > 0;
}

void HotModels::OnWorkerRegistered(int32_t worker, std::string name,
                                   const std::vector<std::string>& declared,
                                   std::shared_ptr<WorkerConnection> connection) {
  std::vector<std::shared_ptr<const v1::RouterMessage>> loads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers_[worker] = Worker{name, connection};
    for (auto& [model, m] : models_) {
      if (std::find(declared.begin(), declared.end(), model) != declared.end()) continue;
      m.asked[worker] = WorkerLoad();
      m.asked[worker].worker = name;
      loads.push_back(m.load);
    }
  }
  for (const auto& l : loads) connection->Send(std::make_unique<v1::RouterMessage>(*l));
}

void HotModels::OnWorkerGone(int32_t worker) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers_.erase(worker);
    for (auto& [model, m] : models_) {
      auto it = m.asked.find(worker);
      if (it != m.asked.end() && !it->second.ready && it->second.error.empty()) {
        it->second.error = "the worker went away while loading";
      }
    }
  }
  settled_.notify_all();
}

namespace {

// A profile that left latency_us out takes the first ready worker's
// measurement (later workers' are not used: one table per model).
absl::Status FillMeasuredLatencies(const v1::ModelLoaded& loaded, ModelProfile* profile) {
  if (profile->latencies_measured) return absl::OkStatus();
  if (loaded.measured_size() == 0) {
    return absl::FailedPreconditionError(
        "the profile leaves latency_us out and the worker measured none");
  }
  std::map<int32_t, std::vector<double>> latency_us;
  for (const auto& m : loaded.measured()) {
    latency_us[m.subnet_id()].assign(m.latency_us().begin(), m.latency_us().end());
  }
  const size_t before = profile->warnings.size();
  absl::Status filled = profile->FillLatencies(latency_us);
  // What the measured figures made the loader adjust (dominated subnets).
  for (size_t i = before; filled.ok() && i < profile->warnings.size(); ++i) {
    SS_LOG(WARNING) << profile->warnings[i];
  }
  return filled;
}

}  // namespace

void HotModels::OnModelLoaded(int32_t worker, const v1::ModelLoaded& loaded) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = models_.find(loaded.model());
    if (it == models_.end()) return;  // unregistered meanwhile
    Model& m = it->second;
    WorkerLoad& w = m.asked[worker];
    if (auto known = workers_.find(worker); known != workers_.end()) w.worker = known->second.name;
    // A worker with a memory budget stored the package when it reported it
    // ready; placement's later loads of it (ServingCore) report here too: a
    // failed one does not undo the registration.
    if (w.ready && !loaded.error().empty()) return;
    w.load_us = loaded.load_us();
    if (!loaded.error().empty()) {
      w.error = loaded.error();
      SS_LOG(WARNING) << "worker " << w.worker << " could not load model " << loaded.model()
                      << ": " << loaded.error();
    } else if (auto s = FillMeasuredLatencies(loaded, &m.profile); !s.ok()) {
      w.error = absl::StrCat("its measured latencies: ", s.message());
    } else if (auto s = hooks_.attach(worker, loaded.model()); !s.ok()) {
      w.error = std::string(s.message());
    } else {
      w.ready = true;
      if (!m.visible) {
        if (auto added = hooks_.add_model(m.profile, m.digest, m.name, m.version); added.ok()) {
          m.visible = true;
          SS_LOG(INFO) << "model " << loaded.model() << " is visible: worker " << w.worker
                       << " loaded it in " << w.load_us / 1000 << " ms";
        } else {
          w.ready = false;
          w.error = absl::StrCat("the router could not serve it: ", added.message());
        }
      }
    }
  }
  settled_.notify_all();
}

void HotModels::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shut_down_ = true;
  }
  settled_.notify_all();
}

}  // namespace superserve
