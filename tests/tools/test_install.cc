// The installed package as a user meets it: `cmake --install` into a fresh prefix, then a
// project outside the tree (tests/tools/install_consumer) built against it with
// find_package(zcx) and with pkg-config, run under the installed zcx-run (and mpirun for
// the "mpi" component). Each test installs into its own temporary prefix. The consumer is
// built with zcx's own compiler and linker flags (a sanitizer build needs them).
#include "tool_runner.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

namespace zcx::test {
namespace {

namespace fs = std::filesystem;

// A temporary prefix with zcx installed in it and the consumer project's build folder.
class Install : public testing::Test {
 protected:
  void SetUp() override {
    char dir_template[] = "/tmp/zcx-install-test-XXXXXX";
    ASSERT_NE(::mkdtemp(dir_template), nullptr);
    root_ = dir_template;
    prefix_ = root_ + "/prefix";
    ToolResult r = run_tool(std::string("'") + ZCX_TEST_CMAKE + "' --install '" +
                            ZCX_TEST_BUILD_DIR + "' --prefix " + prefix_);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  void TearDown() override {
    std::error_code ec;
    if (!root_.empty()) fs::remove_all(root_, ec);
  }

  // Configures and builds install_consumer against the prefix (find_package).
  void build_consumer() {
    const std::string build = root_ + "/consumer";
    ToolResult r = run_tool(std::string("'") + ZCX_TEST_CMAKE + "' -G '" + ZCX_TEST_GENERATOR +
                            "' -S '" + ZCX_TEST_CONSUMER_DIR + "' -B " + build +
                            " -DCMAKE_PREFIX_PATH=" + prefix_ + " '-DCMAKE_C_FLAGS=" +
                            ZCX_TEST_C_FLAGS + "' '-DCMAKE_CXX_FLAGS=" + ZCX_TEST_CXX_FLAGS +
                            "' '-DCMAKE_EXE_LINKER_FLAGS=" + ZCX_TEST_LINK_FLAGS + "' && '" +
                            ZCX_TEST_CMAKE + "' --build " + build);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  // Runs `program` on np ranks under the installed zcx-run; each rank must print "ok".
  void run_ranks(const std::string& program, int np) {
    ToolResult r = run_tool(prefix_ + "/bin/zcx-run -np " + std::to_string(np) +
                            " --timeout 60 -- " + program);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(count_of(r.out, " ok\n"), np) << r.out << r.err;
  }
  bool installed(const std::string& path) const { return fs::exists(prefix_ + "/" + path); }

  std::string root_, prefix_;
};

TEST_F(Install, FindPackageAndPkgConfigConsumersBuildAndRun) {
  for (const char* path : {"include/zcx/zcx.h", "include/zcx/zcx.hpp", "include/zcx/coll.h",
                           "lib/libzcx.so", "lib/cmake/zcx/zcxConfig.cmake",
                           "lib/pkgconfig/zcx.pc", "lib/libnccl-net-zcx.so", "bin/zcx-run",
                           "bin/zcx-perf", "bin/zcx-info", "bin/zcx-plan"})
    EXPECT_TRUE(installed(path)) << path << " is not installed";
  ASSERT_NO_FATAL_FAILURE(build_consumer());
  run_ranks(root_ + "/consumer/consumer_coll", 3);
  run_ranks(root_ + "/consumer/consumer_p2p", 2);

  // pkg-config: the .pc file locates the prefix it was installed into (--prefix here).
  const std::string pc = "PKG_CONFIG_PATH=" + prefix_ + "/lib/pkgconfig pkg-config ";
  ToolResult where = run_tool(pc + "--variable=libdir zcx");
  ASSERT_EQ(where.exit_code, 0) << where.err;
  const std::string libdir = where.out.substr(0, where.out.find('\n'));
  EXPECT_EQ(fs::canonical(libdir), fs::canonical(prefix_ + "/lib"));
  const std::string program = root_ + "/pc_consumer";
  ToolResult cc = run_tool(std::string("'") + ZCX_TEST_C_COMPILER + "' " + ZCX_TEST_C_FLAGS + " " +
                           ZCX_TEST_LINK_FLAGS + " -o " + program + " '" +
                           ZCX_TEST_CONSUMER_DIR + "/consumer_coll.c' $(" + pc +
                           "--cflags --libs zcx) -Wl,-rpath," + prefix_ + "/lib");
  ASSERT_EQ(cc.exit_code, 0) << cc.out << cc.err;
  run_ranks(program, 2);
}

// The "mpi" component: zcx::zcx_mpi found by find_package, a program using it under mpirun.
TEST_F(Install, MpiComponentConsumerRunsUnderMpirun) {
#ifndef ZCX_TEST_MPIEXEC
  GTEST_SKIP() << "zcx was built without MPI (ZCX_WITH_MPI), so there is no zcx-mpi to install";
#else
  EXPECT_TRUE(installed("include/zcx/coll_mpi.h"));
  EXPECT_TRUE(installed("lib/libzcx-mpi.so"));
  ASSERT_NO_FATAL_FAILURE(build_consumer());
  const std::string program = root_ + "/consumer/consumer_mpi";
  ASSERT_TRUE(fs::exists(program)) << "find_package(zcx COMPONENTS mpi) did not find zcx_mpi";
  ToolResult r = run_tool(std::string(ZCX_TEST_MPIEXEC) +
                          " --allow-run-as-root --oversubscribe -np 2 -x ZCX_SOCKET_IFNAME=lo " +
                          program);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_of(r.out, " ok\n"), 2) << r.out << r.err;
#endif
}

}  // namespace
}  // namespace zcx::test
