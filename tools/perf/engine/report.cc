#include "engine/report.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

namespace zcx::perf {
namespace {

constexpr int kColumnWidth = 12;

std::string fixed(double v, int precision) {
  if (!std::isfinite(v)) return "null";
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", precision, v);
  return text;
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char text[64];
  std::snprintf(text, sizeof text, "%.6g", v);
  return text;
}

std::string json_value(const Field& f) {
  if (auto* i = std::get_if<int64_t>(&f.value)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&f.value)) return json_number(*d);
  const auto& s = std::get<std::optional<Summary>>(f.value);
  if (!s) return "null";
  return "{\"median\": " + json_number(s->median) + ", \"min\": " + json_number(s->min) +
         ", \"max\": " + json_number(s->max) + "}";
}

void print_cell(FILE* to, const std::string& text) { std::fprintf(to, " %*s", kColumnWidth, text.c_str()); }

}  // namespace

std::string json_escape(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

void Report::add_meta(const std::string& key, const std::string& value) {
  meta_.push_back({key, value, false});
}

void Report::add_meta(const std::string& key, int64_t value) {
  meta_.push_back({key, std::to_string(value), true});
}

void Report::print_header(FILE* to, const Row& shape) const {
  std::fprintf(to, "# %s %s\n", tool_.c_str(), test_.c_str());
  for (const Meta& m : meta_) std::fprintf(to, "# %s: %s\n", m.key.c_str(), m.text.c_str());
  std::fprintf(to, "#");
  for (const Field& f : shape) {
    if (std::holds_alternative<std::optional<Summary>>(f.value)) {
      for (const char* part : {"_med", "_min", "_max"}) print_cell(to, f.name + part);
    } else {
      print_cell(to, f.name);
    }
  }
  std::fprintf(to, "\n");
}

void Report::print_row(FILE* to, const Row& row) const {
  std::fprintf(to, " ");
  for (const Field& f : row) {
    if (auto* i = std::get_if<int64_t>(&f.value)) {
      print_cell(to, std::to_string(*i));
    } else if (auto* d = std::get_if<double>(&f.value)) {
      print_cell(to, fixed(*d, f.precision));
    } else if (const auto& s = std::get<std::optional<Summary>>(f.value)) {
      for (double v : {s->median, s->min, s->max}) print_cell(to, fixed(v, f.precision));
    } else {
      for (int k = 0; k < 3; ++k) print_cell(to, "-");
    }
  }
  std::fprintf(to, "\n");
  std::fflush(to);
}

std::string Report::to_json() const {
  std::string out = "{\n  \"schema\": \"zcx-perf/1\",\n  \"tool\": \"" + json_escape(tool_) +
                    "\",\n  \"test\": \"" + json_escape(test_) + "\",\n  \"meta\": {";
  for (size_t i = 0; i < meta_.size(); ++i) {
    const Meta& m = meta_[i];
    out += (i ? ",\n    \"" : "\n    \"") + json_escape(m.key) + "\": ";
    out += m.is_number ? m.text : "\"" + json_escape(m.text) + "\"";
  }
  out += "\n  },\n  \"rows\": [";
  for (size_t r = 0; r < rows_.size(); ++r) {
    out += r ? ",\n    {" : "\n    {";
    for (size_t i = 0; i < rows_[r].size(); ++i)
      out += (i ? ", \"" : "\"") + json_escape(rows_[r][i].name) + "\": " + json_value(rows_[r][i]);
    out += "}";
  }
  out += "\n  ]\n}\n";
  return out;
}

bool Report::write_json(const std::string& path, std::string* error) const {
  std::ofstream file(path, std::ios::trunc);
  if (file) file << to_json();
  if (file.good()) file.close();
  if (!file.good()) {
    *error = "cannot write " + path + ": " + strerror(errno);
    return false;
  }
  return true;
}

}  // namespace zcx::perf
