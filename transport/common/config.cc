#include "common/config.h"

#include "common/log.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

extern char** environ;

namespace zcx::config {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<const ParamBase*> params;
  std::map<std::string, std::string> overrides;
  std::set<std::string> warned;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: params outlive static teardown
  return *r;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// Levenshtein distance, for "did you mean" suggestions.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t prev = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cur = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] != b[j - 1])});
      prev = cur;
    }
  }
  return row[b.size()];
}

bool warn_once(const std::string& key) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.warned.insert(key).second;
}

}  // namespace

const char* param_type_name(ParamType t) {
  switch (t) {
    case ParamType::kInt: return "int";
    case ParamType::kSize: return "size";
    case ParamType::kBool: return "bool";
    case ParamType::kString: return "string";
    case ParamType::kDouble: return "double";
  }
  return "?";
}

ParamBase::ParamBase(const char* name, ParamType type, const char* default_text,
                     const char* help)
    : name_(name), type_(type), default_text_(default_text), help_(help) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.params.push_back(this);
}

namespace {
// Overrides are rare (tests): with none set, raw() skips the registry lock. Any change bumps
// the generation, so callers that cache parsed values (per communicator) know to re-read.
std::atomic<int> g_override_count{0};
std::atomic<uint64_t> g_generation{1};
}  // namespace

uint64_t generation() { return g_generation.load(std::memory_order_acquire); }

std::optional<std::string> ParamBase::raw() const {
  if (g_override_count.load(std::memory_order_acquire) > 0) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.overrides.find(name_);
    if (it != r.overrides.end()) return it->second;
  }
  const char* env = getenv(name_);
  if (env == nullptr) return std::nullopt;
  return std::string(env);
}

void ParamBase::warn_bad_value(const std::string& text, const char* expected) const {
  if (!warn_once(std::string(name_) + "=" + text)) return;
  ZCX_WARN(kLogEnv, "%s='%.64s' is not a valid %s; using the default %s", name_, text.c_str(),
           expected, default_text_);
}

void ParamBase::warn_out_of_range(const std::string& text) const {
  if (!warn_once(std::string(name_) + "=" + text)) return;
  ZCX_WARN(kLogEnv, "%s='%.64s' is outside %s; using the default %s", name_, text.c_str(),
           range_text_, default_text_);
}

std::optional<int64_t> parse_int(const std::string& text) {
  std::string t = trim(text);
  if (t.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = strtoll(t.c_str(), &end, 0);
  if (errno != 0 || *end != '\0') return std::nullopt;
  return static_cast<int64_t>(v);
}

std::optional<size_t> parse_size(const std::string& text) {
  std::string t = trim(text);
  if (t.empty() || t[0] == '-') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = strtoull(t.c_str(), &end, 0);
  if (errno != 0 || end == t.c_str()) return std::nullopt;
  std::string suffix(end);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.pop_back();
  unsigned shift = 0;
  if (suffix == "K" || suffix == "k" || suffix == "Ki") shift = 10;
  else if (suffix == "M" || suffix == "m" || suffix == "Mi") shift = 20;
  else if (suffix == "G" || suffix == "g" || suffix == "Gi") shift = 30;
  else if (!suffix.empty()) return std::nullopt;
  if (shift != 0 && v > (SIZE_MAX >> shift)) return std::nullopt;
  return static_cast<size_t>(v << shift);
}

std::optional<bool> parse_bool(const std::string& text) {
  std::string t = trim(text);
  std::transform(t.begin(), t.end(), t.begin(), ::tolower);
  if (t == "1" || t == "y" || t == "yes" || t == "true" || t == "on") return true;
  if (t == "0" || t == "n" || t == "no" || t == "false" || t == "off") return false;
  return std::nullopt;
}

namespace {
std::string int_text(int64_t v) { return std::to_string(v); }
// 65536 -> "64K": a bound as parse_size reads it back (exact multiples only).
std::string size_text(size_t v) {
  const char* suffix[] = {"", "K", "M", "G"};
  int i = 0;
  while (i < 3 && v != 0 && v % 1024 == 0) v /= 1024, ++i;
  return std::to_string(v) + suffix[i];
}
std::string double_text(double v) {
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[32];
  snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
// Default texts must outlive the Param; keep them in a process-lifetime pool.
const char* keep(std::string s) {
  static std::mutex mu;
  static auto* pool = new std::vector<std::unique_ptr<std::string>>();
  std::lock_guard<std::mutex> lock(mu);
  pool->push_back(std::make_unique<std::string>(std::move(s)));
  return pool->back()->c_str();
}
}  // namespace

IntParam::IntParam(const char* name, int64_t def, const char* help, int64_t min, int64_t max)
    : ParamBase(name, ParamType::kInt, keep(int_text(def)), help), def_(def), min_(min),
      max_(max) {
  if (min != INT64_MIN || max != INT64_MAX)
    set_range_text(keep("[" + int_text(min) + ", " + int_text(max) + "]"));
}

int64_t IntParam::get() const {
  auto text = raw();
  if (!text) return def_;
  auto v = parse_int(*text);
  if (!v) {
    warn_bad_value(*text, "integer");
    return def_;
  }
  if (*v < min_ || *v > max_) {
    warn_out_of_range(*text);
    return def_;
  }
  return *v;
}

SizeParam::SizeParam(const char* name, size_t def, const char* help, size_t min, size_t max)
    : ParamBase(name, ParamType::kSize, keep(std::to_string(def)), help), def_(def), min_(min),
      max_(max) {
  if (min != 0 || max != SIZE_MAX)
    set_range_text(keep("[" + size_text(min) + ", " + size_text(max) + "]"));
}

size_t SizeParam::get() const {
  auto text = raw();
  if (!text) return def_;
  auto v = parse_size(*text);
  if (!v) {
    warn_bad_value(*text, "size (e.g. 4096, 64K, 2M)");
    return def_;
  }
  if (*v < min_ || *v > max_) {
    warn_out_of_range(*text);
    return def_;
  }
  return *v;
}

BoolParam::BoolParam(const char* name, bool def, const char* help)
    : ParamBase(name, ParamType::kBool, def ? "1" : "0", help), def_(def) {}

bool BoolParam::get() const {
  auto text = raw();
  if (!text) return def_;
  auto v = parse_bool(*text);
  if (!v) {
    warn_bad_value(*text, "boolean (0/1, y/n, true/false)");
    return def_;
  }
  return *v;
}

DoubleParam::DoubleParam(const char* name, double def, const char* help, double min, double max)
    : ParamBase(name, ParamType::kDouble, keep(std::to_string(def)), help), def_(def), min_(min),
      max_(max) {
  if (!std::isinf(min) || !std::isinf(max))
    set_range_text(keep("[" + double_text(min) + ", " + double_text(max) + "]"));
}

double DoubleParam::get() const {
  auto text = raw();
  if (!text) return def_;
  std::string t = trim(*text);
  char* end = nullptr;
  errno = 0;
  double v = strtod(t.c_str(), &end);
  if (t.empty() || errno != 0 || *end != '\0') {
    warn_bad_value(*text, "number");
    return def_;
  }
  if (!(v >= min_ && v <= max_)) {  // NaN fails both
    warn_out_of_range(*text);
    return def_;
  }
  return v;
}

StringParam::StringParam(const char* name, const char* def, const char* help)
    : ParamBase(name, ParamType::kString, def, help), def_(def) {}

std::string StringParam::get() const {
  auto text = raw();
  return text ? *text : std::string(def_);
}

const ParamBase* find(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const ParamBase* p : r.params)
    if (name == p->name()) return p;
  return nullptr;
}

void for_each(const std::function<void(const ParamBase&)>& fn) {
  std::vector<const ParamBase*> sorted;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    sorted = r.params;
  }
  std::sort(sorted.begin(), sorted.end(),
            [](auto* a, auto* b) { return strcmp(a->name(), b->name()) < 0; });
  for (const ParamBase* p : sorted) fn(*p);
}

namespace {
std::string closest_name(const std::string& name) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for_each([&](const ParamBase& p) {
    size_t d = edit_distance(name, p.name());
    if (d < best_d) best_d = d, best = p.name();
  });
  return best_d <= 3 ? best : std::string();
}
}  // namespace

size_t warn_unknown_env() {
  size_t unknown = 0;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (strncmp(*e, "ZCX_", 4) != 0) continue;
    const char* eq = strchr(*e, '=');
    std::string name(*e, eq ? static_cast<size_t>(eq - *e) : strlen(*e));
    if (find(name) != nullptr) continue;
    ++unknown;
    if (!warn_once("unknown:" + name)) continue;
    std::string hint = closest_name(name);
    ZCX_WARN(kLogEnv, "unknown environment variable %s%s%s (zcx-info -c lists them all)",
             name.c_str(), hint.empty() ? "" : "; did you mean ", hint.c_str());
  }
  return unknown;
}

void set_override(const std::string& name, const std::string& value) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.overrides.insert_or_assign(name, value).second) g_override_count.fetch_add(1);
  g_generation.fetch_add(1);
}

void clear_override(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.overrides.erase(name)) g_override_count.fetch_sub(1);
  g_generation.fetch_add(1);
}

ScopedOverride::ScopedOverride(std::string name, const std::string& value)
    : name_(std::move(name)) {
  set_override(name_, value);
}

ScopedOverride::~ScopedOverride() { clear_override(name_); }

}  // namespace zcx::config
