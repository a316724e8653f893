// zcx-info: runs the tool and checks what it reports.
#include "tool_runner.h"

#include "base/registry.h"

#include <gtest/gtest.h>
#include <zcx/config.h>

namespace zcx::test {
namespace {

const std::string kInfo = ZCX_INFO_PATH;

TEST(ZcxInfo, PrintsVersionFeaturesAndProviders) {
  ToolResult r = run_tool(kInfo);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(std::string("zcx ") + ZCX_VERSION_STRING + "\n"), std::string::npos);
  EXPECT_NE(r.out.find(std::string("verbs=") + (ZCX_HAVE_VERBS ? "yes" : "no")), std::string::npos);
  EXPECT_NE(r.out.find("providers built:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("providers selected (ZCX_PROVIDERS order):"), std::string::npos);
  // Every provider this build has appears with a section of its own.
  for (const zcx_provider_ops_t* ops : providers_built())
    EXPECT_NE(r.out.find(std::string("\nprovider ") + ops->name + " "), std::string::npos)
        << ops->name << " missing from:\n" << r.out;
}

// A provider without a device says why, from what it logged while looking (the libraries
// are forced absent, so this holds on any machine).
TEST(ZcxInfo, ProviderWithoutADeviceSaysWhy) {
  if (provider_find("ib") == nullptr && provider_find("cuda_ipc") == nullptr)
    GTEST_SKIP() << "this build has neither the ib nor the cuda_ipc provider";
  ToolResult r = run_tool("ZCX_IB_LIBRARY=libibverbs-absent.so.1 "
                          "ZCX_CUDA_DRIVER_LIBRARY=libcuda-absent.so.1 " + kInfo);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  if (provider_find("ib") != nullptr) {
    EXPECT_NE(r.out.find("provider ib (wire id 3, flags needs-registration)\n  no device: no RDMA "
                         "devices: cannot load libibverbs-absent.so.1 ("),
              std::string::npos) << r.out;
  }
  if (provider_find("cuda_ipc") != nullptr) {
    EXPECT_NE(r.out.find("  no device: no CUDA driver: libcuda-absent.so.1: "), std::string::npos)
        << r.out;
  }
  EXPECT_EQ(r.err.find("zcx INFO"), std::string::npos) << "the kept lines leaked: " << r.err;
  // With ZCX_DEBUG set, the log itself says it (on stderr) and the line is plain.
  ToolResult logged = run_tool("ZCX_DEBUG=INFO ZCX_IB_LIBRARY=libibverbs-absent.so.1 " + kInfo);
  if (provider_find("ib") != nullptr) {
    EXPECT_NE(logged.err.find("ib: no RDMA devices: cannot load"), std::string::npos) << logged.err;
  }
}

TEST(ZcxInfo, ConfigListsEveryVariableWithValue) {
  ToolResult r = run_tool("ZCX_TIMEOUT=17.5 ZCX_SECRET=00112233445566ff " + kInfo + " -c");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ZCX_TIMEOUT\n    type double, default \"300\", range [0.001, 1e+09], "
                       "set to \"17.5\""),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ZCX_DEBUG\n"), std::string::npos);
  EXPECT_NE(r.out.find("ZCX_PROVIDERS\n"), std::string::npos);
  EXPECT_EQ(r.out.find("00112233445566ff"), std::string::npos) << "the job secret is printed";
}

// The collectives' variables are part of the list, and setting one is not "unknown".
TEST(ZcxInfo, ConfigListsTheCollectivesVariables) {
  ToolResult r = run_tool("ZCX_ALGO=ring " + kInfo + " -c");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"ZCX_ALGO\n", "ZCX_CHUNK_SIZE\n", "ZCX_COLL_SHARED_LANE\n",
                           "ZCX_COLL_SHARED_BULK\n", "ZCX_COLL_NT_MIN\n", "ZCX_COLL_YIELD\n"})
    EXPECT_NE(r.out.find(name), std::string::npos) << name << " missing from:\n" << r.out;
  EXPECT_EQ(r.err.find("unknown environment variable ZCX_ALGO"), std::string::npos) << r.err;
}

TEST(ZcxInfo, ConfigWarnsAboutUnknownVariables) {
  ToolResult r = run_tool("ZCX_NO_SUCH_THING=1 " + kInfo + " -c");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.err.find("ZCX_NO_SUCH_THING"), std::string::npos) << r.err;
}

// A name in ZCX_PROVIDERS that is no provider (a typo) is warned about and skipped; the
// others keep their order.
TEST(ZcxInfo, UnknownProviderNameIsWarnedAndSkipped) {
  if (provider_find("tcp") == nullptr) GTEST_SKIP() << "this build has no tcp provider";
  ToolResult r = run_tool("ZCX_PROVIDERS=tpc,,tcp " + kInfo);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("ZCX_PROVIDERS names 'tpc', which is no zcx provider (shm, cuda_ipc, "
                       "ib, ucx, tcp); ignored"),
            std::string::npos) << r.err;
  EXPECT_NE(r.out.find("providers selected (ZCX_PROVIDERS order): tcp\n"), std::string::npos)
      << r.out;
  // A provider's name is never warned about, built here or not.
  ToolResult known = run_tool("ZCX_PROVIDERS=shm,cuda_ipc,ib,ucx,tcp " + kInfo);
  EXPECT_EQ(known.err.find("no zcx provider"), std::string::npos) << known.err;
}

TEST(ZcxInfo, RejectsUnknownArguments) {
  ToolResult r = run_tool(kInfo + " --bogus");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("usage: zcx-info"), std::string::npos);
}

}  // namespace
}  // namespace zcx::test
