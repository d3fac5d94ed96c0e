#ifndef SUPERSERVE_ROUTER_REPOSITORY_POLLER_H_
#define SUPERSERVE_ROUTER_REPOSITORY_POLLER_H_

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/model_repository.h"
#include "common/time.h"

namespace superserve {

// Triton's "poll" model-control mode, off by default (router flag
// --repository_poll_s): the model repository is re-scanned, and what
// changed goes to the lifecycle as superserve-admin's calls would (one code
// path; it validates and decides whether a version may load):
//   - a new or changed package folder is registered (a changed one is
//     loaded when its manifest version is higher than what is held;
//     docs/packages.md, "Versions");
//   - a folder that disappeared is unregistered (drained);
//   - a refused package (broken, not newer, every worker failed to load
//     it) is logged once and tried again only after its files change.
// Changes are noticed by the names, sizes and modification times of each
// package's files, and the content of those up to 1 MiB (manifest, profile):
// checkpoints are not read on every scan.
class RepositoryPoller {
 public:
  // What the poller asks of the router: ModelLifecycle's Register /
  // Unregister in production, a recorder in tests.
  struct Actions {
    std::function<absl::Status(const std::string& directory, const std::string& name)>
        register_package;
    std::function<absl::Status(const std::string& name)> unregister_model;
  };

  RepositoryPoller(std::string repo, Actions actions);
  ~RepositoryPoller();  // stops the thread
  RepositoryPoller(const RepositoryPoller&) = delete;
  RepositoryPoller& operator=(const RepositoryPoller&) = delete;

  // The models the router already serves from this repository (its start-up
  // scan): a scan that finds them unchanged does nothing.
  void Adopt(const std::vector<ModelEntry>& served);

  // One scan. Returns one line per action or problem, e.g.
  // "registered emu2", "unregistered emu", "emu: ... (not registered)".
  std::vector<std::string> PollOnce();

  // Calls PollOnce every `interval` on a thread of its own until Stop().
  void Start(Nanos interval);
  void Stop();

 private:
  struct Known {
    std::string fingerprint;
    bool registered = false;  // false: a failure at this fingerprint, not retried
  };
  static std::string Fingerprint(const std::string& directory);

  const std::string repo_;
  const Actions actions_;
  std::map<std::string, Known> known_;  // by folder (= model) name; PollOnce's thread only
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace superserve

#endif  // SUPERSERVE_ROUTER_REPOSITORY_POLLER_H_
