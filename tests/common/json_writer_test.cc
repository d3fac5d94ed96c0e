#include "common/json_writer.h"

#include <limits>

#include "gtest/gtest.h"

namespace superserve {
namespace {

TEST(JsonWriterTest, WritesFieldsInOrderAndEscapes) {
  JsonWriter nested;
  nested.Add("x", 1);
  std::string s = JsonWriter()
                      .Add("policy", "slack\"fit")
                      .Add("queries", int64_t{42})
                      .Add("ok", true)
                      .Add("acc", 0.5)
                      .Add("nan", std::numeric_limits<double>::quiet_NaN())
                      .Add("n", nested)
                      .AddArray("v", std::vector<double>{1, 2.5})
                      .ToString();
  EXPECT_EQ(s,
            R"({"policy":"slack\"fit","queries":42,"ok":true,"acc":0.5,"nan":null,"n":{"x":1},"v":[1,2.5]})");
}

}  // namespace
}  // namespace superserve
