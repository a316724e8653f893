// Results of a zcx-perf test: a table on stdout, printed row by row as sizes finish, and the
// same rows as JSON (schema: docs/PERF_JSON.md).
#pragma once

#include "engine/stats.h"

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace zcx::perf {

// One cell of a row. A summary prints as three columns <name>_med, _min, _max and as an
// object {"median","min","max"} in JSON; an empty summary (test not run) as "-" and null.
struct Field {
  std::string name;
  std::variant<int64_t, double, std::optional<Summary>> value;
  int precision = 2;  // digits after the point for doubles and summaries
};
using Row = std::vector<Field>;

class Report {
 public:
  Report(std::string tool, std::string test) : tool_(std::move(tool)), test_(std::move(test)) {}

  // Run description: printed as "# key: value" lines and stored in the JSON "meta" object.
  void add_meta(const std::string& key, const std::string& value);
  void add_meta(const std::string& key, int64_t value);

  // Printing: meta and column names (from the first row's fields), then each row.
  void print_header(FILE* to, const Row& shape) const;
  void print_row(FILE* to, const Row& row) const;
  void add_row(Row row) { rows_.push_back(std::move(row)); }

  std::string to_json() const;
  // Writes to_json() to path; on failure *error says why.
  bool write_json(const std::string& path, std::string* error) const;

 private:
  struct Meta {
    std::string key;
    std::string text;
    bool is_number;
  };
  std::string tool_, test_;
  std::vector<Meta> meta_;
  std::vector<Row> rows_;
};

std::string json_escape(const std::string& text);

}  // namespace zcx::perf
