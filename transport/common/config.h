// The typed registry of every ZCX_ environment variable.
//
// Each variable is one Param object at namespace scope, defined next to the code that owns
// it (core ones in config_vars.cc, provider ones in <provider>/*_config.cc). Construction
// registers it; `zcx-info -c` lists the registry; an unknown ZCX_ variable warns once.
// Nothing below this module calls getenv for a ZCX_ name.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace zcx::config {

enum class ParamType { kInt, kSize, kBool, kString, kDouble };
const char* param_type_name(ParamType t);

class ParamBase {
 public:
  ParamBase(const char* name, ParamType type, const char* default_text, const char* help);
  ParamBase(const ParamBase&) = delete;
  ParamBase& operator=(const ParamBase&) = delete;
  const char* name() const { return name_; }
  ParamType type() const { return type_; }
  const char* default_text() const { return default_text_; }
  const char* help() const { return help_; }
  // "[1, 4096]" for a variable whose values are bounded, else "" (zcx-info -c shows it).
  const char* range_text() const { return range_text_; }
  // The raw text in force: test override, then environment; nullopt means default.
  std::optional<std::string> raw() const;

 protected:
  // Warns once per process about an unparsable value and returns the default.
  void warn_bad_value(const std::string& text, const char* expected) const;
  // A value that parses but lies outside range_text(): warned once, the default used.
  void warn_out_of_range(const std::string& text) const;
  void set_range_text(const char* text) { range_text_ = text; }

 private:
  const char* name_;
  ParamType type_;
  const char* default_text_;
  const char* help_;
  const char* range_text_ = "";
};

class IntParam : public ParamBase {
 public:
  IntParam(const char* name, int64_t def, const char* help, int64_t min = INT64_MIN,
           int64_t max = INT64_MAX);
  int64_t get() const;

 private:
  int64_t def_, min_, max_;
};

// Byte counts: accepts 4096, 64K, 2M, 1G (powers of two).
class SizeParam : public ParamBase {
 public:
  SizeParam(const char* name, size_t def, const char* help, size_t min = 0,
            size_t max = SIZE_MAX);
  size_t get() const;

 private:
  size_t def_, min_, max_;
};

class BoolParam : public ParamBase {
 public:
  BoolParam(const char* name, bool def, const char* help);
  bool get() const;

 private:
  bool def_;
};

class DoubleParam : public ParamBase {
 public:
  // NaN is never in range; infinities only where a bound is itself infinite.
  DoubleParam(const char* name, double def, const char* help, double min = -HUGE_VAL,
              double max = HUGE_VAL);
  double get() const;

 private:
  double def_, min_, max_;
};

class StringParam : public ParamBase {
 public:
  StringParam(const char* name, const char* def, const char* help);
  std::string get() const;

 private:
  const char* def_;
};

// Parsers shared with the params (exposed for tests). Return nullopt on bad input.
std::optional<int64_t> parse_int(const std::string& text);
std::optional<size_t> parse_size(const std::string& text);
std::optional<bool> parse_bool(const std::string& text);

const ParamBase* find(const std::string& name);
void for_each(const std::function<void(const ParamBase&)>& fn);  // sorted by name

// Warns once per process about ZCX_ variables that no Param declares, with a suggestion.
// Returns the number of unknown variables found.
size_t warn_unknown_env();

// Test hooks: an override wins over the environment until cleared.
void set_override(const std::string& name, const std::string& value);
void clear_override(const std::string& name);

// Bumped by every override change: a cache of parsed values is stale when it differs.
// (The environment is not watched: it is read when a value is first needed.)
uint64_t generation();

// RAII override for tests.
class ScopedOverride {
 public:
  ScopedOverride(std::string name, const std::string& value);
  ~ScopedOverride();
  ScopedOverride(const ScopedOverride&) = delete;
  ScopedOverride& operator=(const ScopedOverride&) = delete;

 private:
  std::string name_;
};

}  // namespace zcx::config
