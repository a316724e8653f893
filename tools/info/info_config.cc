// zcx-info -c: the registry of ZCX_ variables.
#include "info.h"

#include "common/config.h"

#include <cstdio>
#include <optional>
#include <string>

namespace zcx::info {
namespace {

// Prints text wrapped at ~88 columns with a fixed indent.
void print_wrapped(const char* text, const char* indent) {
  const size_t width = 88;
  std::string line, word, all = text;
  all += ' ';
  for (char c : all) {
    if (c != ' ') { word += c; continue; }
    if (word.empty()) continue;
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      std::printf("%s%s\n", indent, line.c_str());
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    word.clear();
  }
  if (!line.empty()) std::printf("%s%s\n", indent, line.c_str());
}

// "300.000000" -> "300": the registry prints doubles with %f.
std::string default_shown(const config::ParamBase& p) {
  std::string text = p.default_text();
  if (p.type() != config::ParamType::kDouble || text.find('.') == std::string::npos) return text;
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text;
}

void print_param(const config::ParamBase& p) {
  std::optional<std::string> value = p.raw();
  std::printf("%s\n", p.name());
  std::printf("    type %s, default \"%s\"", config::param_type_name(p.type()),
              default_shown(p).c_str());
  if (p.range_text()[0] != '\0') std::printf(", range %s", p.range_text());
  bool secret = std::string(p.name()).find("SECRET") != std::string::npos;
  if (value && secret) std::printf(", set (value not shown)");
  else if (value) std::printf(", set to \"%s\"", value->c_str());
  std::printf("\n");
  print_wrapped(p.help(), "    ");
}

}  // namespace

int print_config() {
  int count = 0;
  config::for_each([&](const config::ParamBase& p) {
    print_param(p);
    ++count;
  });
  std::printf("\n%d variables. Unknown ZCX_ variables in the environment are warned about.\n",
              count);
  (void)config::warn_unknown_env();
  return 0;
}

}  // namespace zcx::info
