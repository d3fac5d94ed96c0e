// Hot registration on a real (torch) worker (issue 17): a router and one
// torch worker serving models/fmnist; a copy of the package under another
// name is registered at run time, loaded by the running worker over its
// stream, and answers exactly what the start-up model answers for the same
// input and subnet; a package whose checkpoint does not load is refused
// naming the worker's reason, and nothing becomes visible; after
// unregistering, the worker's resident memory is back near where it was.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_replace.h"
#include "bench/harness/local_cluster.h"
#include "common/tensor_codec.h"
#include "router/client/inference_client.h"
#include "superserve/v1/admin.grpc.pb.h"
#include "tests/router/engine_test_util.h"

namespace superserve {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using testing::ReadAll;

// models/fmnist copied as `name` (the profile's model and the manifest's name
// follow the folder).
void CopyPackage(const std::string& to_repo, const std::string& name) {
  const std::string src = std::string(SUPERSERVE_TEST_SOURCE_DIR) + "/models/fmnist";
  const std::string dir = to_repo + "/" + name;
  fs::create_directories(dir);
  fs::copy_file(src + "/checkpoint.pt", dir + "/checkpoint.pt");
  std::ofstream(dir + "/profile.json") << absl::StrReplaceAll(
      ReadAll(src + "/profile.json"), {{"\"model\": \"fmnist\"", "\"model\": \"" + name + "\""}});
  std::ofstream(dir + "/manifest.json") << absl::StrReplaceAll(
      ReadAll(src + "/manifest.json"), {{"\"name\": \"fmnist\"", "\"name\": \"" + name + "\""}});
}

int64_t RssKb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      int64_t kb = 0;
      std::istringstream(line.substr(6)) >> kb;
      return kb;
    }
  }
  return -1;
}

class HotRegistration : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ = testing::MakeWorkDir();
    repo_ = work_ + "/repo";
    CopyPackage(repo_, "fmnist");
    LocalClusterOptions o;
    o.bin_dir = testing::BinDir();
    o.model_repo = repo_;
    o.work_dir = work_;
    o.workers = 1;
    o.worker_flags = {"--threads=1"};
    // One fixed subnet (the most accurate) for every model: answers compare.
    o.router_flags = {"--policy=clipper+", "--fixed_subnet=-1"};
    auto c = LocalCluster::Start(o);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = *std::move(c);
    admin_ = v1::Admin::NewStub(
        grpc::CreateChannel(cluster_->router_address(), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    cluster_.reset();
    fs::remove_all(work_);
  }

  grpc::Status Register(const std::string& path, v1::RegisterModelResponse* resp) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + cluster_->admin_token());
    v1::RegisterModelRequest req;
    req.set_path(path);
    req.set_timeout_ms(120000);
    return admin_->RegisterModel(&ctx, req, resp);
  }
  grpc::Status Unregister(const std::string& name) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + cluster_->admin_token());
    v1::UnregisterModelRequest req;
    req.set_name(name);
    v1::UnregisterModelResponse resp;
    return admin_->UnregisterModel(&ctx, req, &resp);
  }

  std::string work_, repo_;
  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<v1::Admin::Stub> admin_;
};

TEST_F(HotRegistration, TorchWorkerLoadsAPackageWithoutRestartingAndFreesItAfter) {
  InferenceClient client(cluster_->router_address());
  ASSERT_TRUE(client.WaitForConnected(Seconds(5)));
  v1::InferRequest req;
  req.set_model("fmnist");
  std::vector<float> image(28 * 28);
  for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<float>((i * 37) % 255) / 255.f;
  EncodeTensor(MakeFloatTensor({1, 28, 28}, image), req.mutable_input());
  auto before = client.Infer(req, Millis(5000));
  ASSERT_TRUE(before.ok()) << before.status();
  const pid_t worker = cluster_->worker(0).pid();
  const int64_t rss_before = RssKb(worker);

  // The running worker's repository was loaded before fmnist-hot existed.
  CopyPackage(work_ + "/packages", "fmnist-hot");
  v1::RegisterModelResponse resp;
  auto s = Register(work_ + "/packages/fmnist-hot", &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(resp.visible());
  ASSERT_EQ(resp.workers_size(), 1);
  EXPECT_TRUE(resp.workers(0).ready()) << resp.workers(0).error();
  EXPECT_EQ(resp.model().workers(), 1);
  std::printf("fmnist-hot loaded on the torch worker in %lld ms\n",
              static_cast<long long>(resp.workers(0).load_ms()));
  EXPECT_EQ(cluster_->worker(0).pid(), worker);  // not restarted

  req.set_model("fmnist-hot");
  auto hot = client.Infer(req, Millis(5000));
  ASSERT_TRUE(hot.ok()) << hot.status();
  EXPECT_EQ(hot->served_by().subnet_id(), before->served_by().subnet_id());
  EXPECT_EQ(hot->output().data(), before->output().data());  // same weights, same bytes
  const int64_t rss_loaded = RssKb(worker);

  ASSERT_TRUE(Unregister("fmnist-hot").ok());
  EXPECT_EQ(client.Infer(req, Millis(2000)).status().code(), absl::StatusCode::kInvalidArgument);
  // The worker frees it after the unregister's UnloadModel.
  int64_t rss_after = RssKb(worker);
  for (int i = 0; i < 50 && rss_after > rss_before * 105 / 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    rss_after = RssKb(worker);
  }
  std::printf("torch worker RSS: %lld kB before, %lld kB with fmnist-hot, %lld kB after "
              "unregistering (%.1f %% of before)\n",
              static_cast<long long>(rss_before), static_cast<long long>(rss_loaded),
              static_cast<long long>(rss_after), 100.0 * rss_after / rss_before);
  EXPECT_LE(rss_after, rss_before * 105 / 100);
  req.set_model("fmnist");
  EXPECT_TRUE(client.Infer(req, Millis(5000)).ok());
}

TEST_F(HotRegistration, ACheckpointThatDoesNotLoadIsRefusedWithTheWorkersReason) {
  CopyPackage(work_ + "/packages", "fmnist-broken");
  const std::string ckpt = work_ + "/packages/fmnist-broken/checkpoint.pt";
  // A whole zip archive that is no LibTorch checkpoint (no entries): the
  // package checks pass, the worker's load fails. A checkpoint cut short is
  // refused before any worker sees it (model_package_test).
  std::ofstream(ckpt, std::ios::binary | std::ios::trunc)
      << std::string("PK\x05\x06", 4) + std::string(18, '\0');
  v1::RegisterModelResponse resp;
  auto s = Register(work_ + "/packages/fmnist-broken", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("no worker loaded model fmnist-broken"));
  // The worker's name and its reason (a failed call carries no response body).
  EXPECT_THAT(s.error_message(), ::testing::ContainsRegex("#[0-9]+: the torch executor: "));
  auto models = cluster_->WorkersPerModel();
  ASSERT_TRUE(models.ok());
  for (const auto& [name, workers] : *models) EXPECT_NE(name, "fmnist-broken");
  // Nothing half-registered: the same name registers once fixed.
  fs::copy_file(std::string(SUPERSERVE_TEST_SOURCE_DIR) + "/models/fmnist/checkpoint.pt", ckpt,
                fs::copy_options::overwrite_existing);
  v1::RegisterModelResponse again;
  auto fixed = Register(work_ + "/packages/fmnist-broken", &again);
  EXPECT_TRUE(fixed.ok()) << fixed.error_message();
  EXPECT_TRUE(again.visible());
}

TEST_F(HotRegistration, AManifestWhoseArchitectureDiffersFromTheCheckpointIsRefused) {
  CopyPackage(work_ + "/packages", "fmnist-wide");
  const std::string manifest = work_ + "/packages/fmnist-wide/manifest.json";
  const std::string text = ReadAll(manifest);
  const std::string widths = "\"stage_widths\": [32, 64, 128, 256]";
  ASSERT_NE(text.find(widths), std::string::npos) << text;
  std::ofstream(manifest) << absl::StrReplaceAll(
      text, {{widths, "\"stage_widths\": [32, 64, 128, 512]"}});
  v1::RegisterModelResponse resp;
  auto s = Register(work_ + "/packages/fmnist-wide", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_THAT(s.error_message(),
              HasSubstr("manifest.json: field architecture.stage_widths: [32, 64, 128, 512] but "
                        "the checkpoint's is [32, 64, 128, 256]"));
}

}  // namespace
}  // namespace superserve
