#include "common/json_writer.h"

#include <cmath>
#include <cstdio>

namespace superserve {

std::string JsonWriter::Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void JsonWriter::Key(std::string_view key) {
  if (!body_.empty()) body_ += ",";
  body_ += Quote(key);
  body_ += ":";
}

JsonWriter& JsonWriter::Add(std::string_view key, double v) {
  Key(key);
  if (!std::isfinite(v)) {
    body_ += "null";
  } else {
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%.10g", v);
    body_ += buf;
  }
  return *this;
}

JsonWriter& JsonWriter::Add(std::string_view key, int64_t v) {
  Key(key);
  body_ += std::to_string(v);
  return *this;
}

JsonWriter& JsonWriter::Add(std::string_view key, bool v) {
  Key(key);
  body_ += v ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::Add(std::string_view key, std::string_view v) {
  Key(key);
  body_ += Quote(v);
  return *this;
}

JsonWriter& JsonWriter::Add(std::string_view key, const JsonWriter& nested) {
  Key(key);
  body_ += nested.ToString();
  return *this;
}

JsonWriter& JsonWriter::AddArray(std::string_view key, const std::vector<JsonWriter>& items) {
  Key(key);
  body_ += "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) body_ += ",";
    body_ += items[i].ToString();
  }
  body_ += "]";
  return *this;
}

JsonWriter& JsonWriter::AddArray(std::string_view key, const std::vector<double>& items) {
  Key(key);
  body_ += "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) body_ += ",";
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%.10g", items[i]);
    body_ += std::isfinite(items[i]) ? buf : "null";
  }
  body_ += "]";
  return *this;
}

std::string JsonWriter::ToString() const { return "{" + body_ + "}"; }

}  // namespace superserve
