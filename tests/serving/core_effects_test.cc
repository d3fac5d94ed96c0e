// The core's effects carried out after its lock is released, in their
// order: per channel unloads, loads, then batches (each told to the
// observer first); then answers, closes, and the observer's events. Without
// an observer only the channels and the answers are called.
#include "serving/core_effects.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace superserve {
namespace {

using EffectsLog = std::vector<std::string>;

class EffectsLogChannel final : public WorkerChannel {
 public:
  explicit EffectsLogChannel(EffectsLog* log) : log_(log) {}
  void OnRegistered(const std::string&, Nanos) override { log_->push_back("registered"); }
  void Send(BatchPlan b) override { log_->push_back(absl::StrCat("send ", b.batch_id)); }
  void Load(const std::string& model, Nanos) override { log_->push_back("load " + model); }
  void Unload(const std::string& model) override { log_->push_back("unload " + model); }
  void Close(const absl::Status& why) override {
    log_->push_back(absl::StrCat("close ", why.message()));
  }

 private:
  EffectsLog* log_;
};

class EffectsLogHandle final : public QueryHandle {
 public:
  explicit EffectsLogHandle(EffectsLog* log) : log_(log) {}
  void Deliver(QueryAnswer a) override { log_->push_back(absl::StrCat("deliver ", a.subnet_id)); }

 private:
  EffectsLog* log_;
};

class EffectsLogObserver final : public ServingObserver {
 public:
  explicit EffectsLogObserver(EffectsLog* log) : log_(log) {}
  void OnQueryDone(const QueryDone& d) override {
    log_->push_back(absl::StrCat("done ", *d.model, " ", d.id));
  }
  void OnBatchSent(const BatchPlan& b) override {
    log_->push_back(absl::StrCat("sent ", b.batch_id));
  }
  void OnWorkersAlive(int32_t alive) override { log_->push_back("alive"); }
  void OnQueueDepth(const std::string& model, int64_t depth) override {
    log_->push_back(absl::StrCat("depth ", model, " ", depth));
  }
  void OnWorkerBusyFraction(const std::string& worker, double f) override {
    log_->push_back(absl::StrCat("busy ", worker, " ", f));
  }
  void OnWorkerSlowdown(const std::string& worker, double s) override {
    log_->push_back(absl::StrCat("slowdown ", worker, " ", s));
  }
  void OnModelLoaded(const std::string& model, const std::string& worker, Nanos cold) override {
    log_->push_back(absl::StrCat("loaded ", model, " ", worker, " ", cold));
  }
  void OnBatchRefused(const std::string& model, const std::string& worker) override {
    log_->push_back(absl::StrCat("refused ", model, " ", worker));
  }

 private:
  EffectsLog* log_;
};

// Effects of every kind, filled in an order unlike the one they run in.
void FillEveryEffect(std::shared_ptr<WorkerChannel> channel, EffectsLogHandle* handle,
                     CoreEffects* e) {
  auto model = std::make_shared<const std::string>("m");
  auto worker = std::make_shared<const std::string>("w#0");
  QueryDone done;
  done.id = 5;
  e->done.emplace_back(model, done);
  QueryAnswer answer;
  answer.subnet_id = 11;
  e->answers.emplace_back(handle, answer);
  BatchPlan plan;
  plan.batch_id = 7;
  e->sends.emplace_back(channel, plan);
  CoreEffects::Rare& r = e->rare_effects();
  r.loaded.emplace_back(model, worker, Millis(3));
  r.refused.emplace_back(model, worker);
  r.slowdown.emplace_back(worker, 2);
  r.busy.emplace_back(worker, 0.5);
  r.depths.emplace_back(model, 4);
  r.closes.emplace_back(channel, absl::UnavailableError("gone"));
  r.loads.emplace_back(channel, "m2", Millis(50));
  r.unloads.emplace_back(channel, "m1");
  e->workers_alive = 1;  // the core's to report, not Carry's
  e->wake = Millis(9);
}

TEST(CoreEffectsTest, CarriesEveryEffectInItsOrder) {
  EffectsLog log;
  auto channel = std::make_shared<EffectsLogChannel>(&log);
  EffectsLogHandle handle(&log);
  EffectsLogObserver observer(&log);
  CoreEffects e;
  FillEveryEffect(channel, &handle, &e);
  e.Carry(&observer);
  EXPECT_EQ(log, (EffectsLog{"unload m1", "load m2", "sent 7", "send 7", "deliver 11", "close gone",
                             "done m 5", "depth m 4", "busy w#0 0.5", "slowdown w#0 2",
                             "refused m w#0", "loaded m w#0 3000000"}));
}

TEST(CoreEffectsTest, WithoutAnObserverOnlyChannelsAndAnswers) {
  EffectsLog log;
  auto channel = std::make_shared<EffectsLogChannel>(&log);
  EffectsLogHandle handle(&log);
  CoreEffects e;
  FillEveryEffect(channel, &handle, &e);
  e.Carry(nullptr);
  EXPECT_EQ(log, (EffectsLog{"unload m1", "load m2", "send 7", "deliver 11", "close gone"}));

  log.clear();
  CoreEffects common;  // an arrival's or a result's: no rare effects built
  BatchPlan plan;
  plan.batch_id = 8;
  common.sends.emplace_back(channel, plan);
  common.Carry(nullptr);
  EXPECT_EQ(common.rare, nullptr);
  EXPECT_EQ(log, EffectsLog{"send 8"});
}

}  // namespace
}  // namespace superserve
