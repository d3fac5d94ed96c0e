#ifndef SUPERSERVE_COMMON_JSON_WRITER_H_
#define SUPERSERVE_COMMON_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace superserve {

// Builds one flat-or-nested JSON object in insertion order, for the
// `--json` last lines of our tools. Non-finite doubles are written as null.
class JsonWriter {
 public:
  JsonWriter& Add(std::string_view key, double v);
  JsonWriter& Add(std::string_view key, int64_t v);
  JsonWriter& Add(std::string_view key, int v) { return Add(key, static_cast<int64_t>(v)); }
  JsonWriter& Add(std::string_view key, uint64_t v) { return Add(key, static_cast<int64_t>(v)); }
  JsonWriter& Add(std::string_view key, bool v);
  JsonWriter& Add(std::string_view key, std::string_view v);
  JsonWriter& Add(std::string_view key, const char* v) { return Add(key, std::string_view(v)); }
  JsonWriter& Add(std::string_view key, const JsonWriter& nested);
  JsonWriter& AddArray(std::string_view key, const std::vector<JsonWriter>& items);
  JsonWriter& AddArray(std::string_view key, const std::vector<double>& items);
  std::string ToString() const;

  static std::string Quote(std::string_view s);

 private:
  void Key(std::string_view key);
  std::string body_;
};

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_JSON_WRITER_H_
