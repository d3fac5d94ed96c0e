// The client library's pure pieces: transport names and how the stream
// transport splits a backlog of queries into messages.
#include <gtest/gtest.h>

#include <vector>

#include "router/client/inference_client.h"

namespace superserve {
namespace {

TEST(InferenceClientTest, ParsesTransportNames) {
  EXPECT_EQ(ParseTransport("unary").value(), Transport::kUnary);
  EXPECT_EQ(ParseTransport("stream").value(), Transport::kStream);
  auto bad = ParseTransport("udp");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("udp"), absl::string_view::npos);
}

TEST(InferenceClientTest, BacklogGoesOutInMessagesOfBoundedSize) {
  const std::vector<size_t> none;
  EXPECT_EQ(QueriesPerMessage(none, 100), 0u);
  // Everything fits: one message.
  EXPECT_EQ(QueriesPerMessage(std::vector<size_t>{10, 20, 30}, 100), 3u);
  EXPECT_EQ(QueriesPerMessage(std::vector<size_t>{40, 60}, 100), 2u);  // exactly full
  // A prefix that fits; the rest waits for the next message.
  EXPECT_EQ(QueriesPerMessage(std::vector<size_t>{40, 40, 40, 5}, 100), 2u);
  // A query larger than the limit still goes, alone.
  EXPECT_EQ(QueriesPerMessage(std::vector<size_t>{500, 10}, 100), 1u);
  // A 1 MB-per-query backlog of 70 under the 4 MB limit: 4 per message.
  std::vector<size_t> big(70, 1 << 20);
  EXPECT_EQ(QueriesPerMessage(big, 4 << 20), 4u);
}

}  // namespace
}  // namespace superserve
