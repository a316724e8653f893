// Shared pieces of the plugin harness: which library to load, bounded wait loops written
// the way NCCL's proxy drives the plugin, and data patterns.
#pragma once

#include "net_driver.h"

#include <gtest/gtest.h>

#include <string>

namespace zcx::plugin_test {

// A plugin build and the provider it is told to use (nullptr: the plugin's default, auto).
struct Variant {
  const char* label;
  const char* path;
  const char* provider;
};
struct Case {
  Variant variant;
  int version;
};
std::vector<Case> all_cases();
inline void PrintTo(const Case& c, std::ostream* os) { *os << c.variant.label << "_v" << c.version; }
std::string case_name(const testing::TestParamInfo<Case>& info);

// Sets ZCX_NET_PROVIDER for the variant, loads and inits. On failure fills *skip when the
// failure is "no provider/device in this build" (a reason to skip), else *why.
bool open_plugin(const Case& c, NetDriver* d, std::string* why, std::string* skip);

void fill(void* buf, size_t size, unsigned seed);
bool verify(const void* buf, size_t size, unsigned seed, std::string* why);

// Each returns "" on success, else what went wrong. All loops are bounded (20 s).
std::string connect_pair_single_thread(NetDriver& d, int dev, void** sc, void** rc, void** lc,
                                       double* max_call_ms);
std::string isend_retry(NetDriver& d, void* sc, void* data, size_t size, int tag, void* mh,
                        void** req, int* null_retries);
std::string irecv_retry(NetDriver& d, void* rc, int n, void** data, size_t* sizes, int* tags,
                        void** mhs, void** req, bool optional_completion);
std::string wait_done(NetDriver& d, void* req, int* sizes);

}  // namespace zcx::plugin_test
