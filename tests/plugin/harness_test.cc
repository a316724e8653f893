// One-process plugin tests, for every exported version and both plugin builds (the real
// libnccl-net-zcx.so with its default provider choice, and the test build with the fake
// loopback provider): properties, NCCL's single-thread listen/connect/accept loop, a
// corrupted or foreign connect handle, and dlclose followed by reload.
#include "harness_util.h"

#include <dirent.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <vector>

namespace zcx::plugin_test {
namespace {

class PluginTest : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    clear_logged_lines();
    std::string why, skip;
    if (!open_plugin(GetParam(), &d_, &why, &skip)) {
      if (!skip.empty()) GTEST_SKIP() << skip;
      FAIL() << why;
    }
  }
  void TearDown() override {
    if (d_.version() != 0) {
      EXPECT_EQ(d_.finalize(), ncclSuccess);
    }
  }
  NetDriver d_;
};

int count_threads() {
  int n = 0;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (dirent* e = readdir(dir)) n += e->d_name[0] != '.';
    closedir(dir);
  }
  return n;
}

TEST_P(PluginTest, PropertiesAndChoiceLine) {
  EXPECT_STREQ(d_.name(), "zcx");
  int ndev = 0;
  ASSERT_EQ(d_.devices(&ndev), ncclSuccess);
  ASSERT_GE(ndev, 1);
  for (int dev = 0; dev < ndev; ++dev) {
    Props p;
    ASSERT_EQ(d_.properties(dev, &p), ncclSuccess);
    fprintf(stderr, "dev %d: name %s pciPath %s guid 0x%llx speed %d Mb/s latency %.1f us "
            "ptrSupport 0x%x regIsGlobal %d maxComms %d maxRecvs %d maxP2pBytes %zu\n", dev,
            p.name.c_str(), p.pci_null ? "NULL" : p.pci_path.c_str(),
            static_cast<unsigned long long>(p.guid), p.speed, p.latency, p.ptr_support,
            p.reg_is_global, p.max_comms, p.max_recvs, p.max_p2p_bytes);
    EXPECT_FALSE(p.name.empty());
    EXPECT_GT(p.speed, 0);
    EXPECT_GE(p.max_recvs, 1);
    EXPECT_LE(p.max_recvs, 8);
    EXPECT_GT(p.max_comms, 0);
    EXPECT_TRUE(p.ptr_support & NCCL_PTR_HOST);
    if (!p.pci_null) {
      EXPECT_EQ(p.pci_path.rfind("/sys/devices/", 0), 0u) << p.pci_path;
    }
    if (d_.version() >= 9) {
      EXPECT_GT(p.max_p2p_bytes, 0u);
      EXPECT_EQ(p.vprops_ndevs, 1);
    }
  }
  Props bad;
  EXPECT_NE(d_.properties(ndev, &bad), ncclSuccess);
  bool choice_logged = false;
  for (const std::string& line : logged_lines())
    choice_logged |= line.find("using provider") != std::string::npos;
  EXPECT_TRUE(choice_logged) << "no INFO line naming the chosen provider reached NCCL's logger";
}

TEST_P(PluginTest, SingleThreadListenConnectAcceptLoopAndLoopback) {
  void *sc, *rc, *lc;
  double max_ms = 0;
  ASSERT_EQ(connect_pair_single_thread(d_, 0, &sc, &rc, &lc, &max_ms), "");
  EXPECT_LT(max_ms, 1000.0) << "a connect/accept call blocked";
  std::vector<char> out(100000), in(200000);
  fill(out.data(), out.size(), 7);
  void *smh = nullptr, *rmh = nullptr;
  ASSERT_EQ(d_.reg_mr(sc, out.data(), out.size(), NCCL_PTR_HOST, &smh), ncclSuccess);
  ASSERT_EQ(d_.reg_mr(rc, in.data(), in.size(), NCCL_PTR_HOST, &rmh), ncclSuccess);
  void* rreq = nullptr;
  void* dst = in.data();
  size_t posted = in.size();
  int tag = 0;
  ASSERT_EQ(irecv_retry(d_, rc, 1, &dst, &posted, &tag, &rmh, &rreq, false), "");
  void* sreq = nullptr;
  ASSERT_EQ(isend_retry(d_, sc, out.data(), out.size(), 0, smh, &sreq, nullptr), "");
  int sdone = 0, rdone = 0, ssize = -1, rsize = -1;
  for (int i = 0; i < 2000000 && !(sdone && rdone); ++i) {  // one thread drives both ends
    if (!sdone) {
      ASSERT_EQ(d_.test(sreq, &sdone, &ssize), ncclSuccess);
    }
    if (!rdone) {
      ASSERT_EQ(d_.test(rreq, &rdone, &rsize), ncclSuccess);
    }
  }
  ASSERT_TRUE(sdone && rdone);
  EXPECT_EQ(rsize, static_cast<int>(out.size()));
  std::string why;
  EXPECT_TRUE(verify(in.data(), out.size(), 7, &why)) << why;
  EXPECT_EQ(d_.dereg_mr(sc, smh), ncclSuccess);
  EXPECT_EQ(d_.dereg_mr(rc, rmh), ncclSuccess);
  EXPECT_EQ(d_.dereg_mr(rc, nullptr), ncclSuccess);
  EXPECT_EQ(d_.close_send(sc), ncclSuccess);
  EXPECT_EQ(d_.close_recv(rc), ncclSuccess);
  EXPECT_EQ(d_.close_listen(lc), ncclSuccess);
}

TEST_P(PluginTest, CorruptedOrForeignHandleIsAClearError) {
  char good[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* lc = nullptr;
  ASSERT_EQ(d_.listen(0, good, &lc), ncclSuccess);
  std::vector<std::vector<char>> bad;
  bad.emplace_back(NCCL_NET_HANDLE_MAXSIZE, '\x5a');                      // garbage
  bad.emplace_back(good, good + NCCL_NET_HANDLE_MAXSIZE); bad.back()[5] ^= 0x40;  // provider
  bad.emplace_back(good, good + NCCL_NET_HANDLE_MAXSIZE); bad.back()[4] = 99;     // version
  bad.emplace_back(good, good + NCCL_NET_HANDLE_MAXSIZE);                 // length field
  bad.back()[6] = '\xff';
  bad.back()[7] = '\xff';
  for (size_t i = 0; i < bad.size(); ++i) {
    void* sc = nullptr;
    EXPECT_NE(d_.connect(0, bad[i].data(), &sc), ncclSuccess) << "bad handle " << i;
    EXPECT_EQ(sc, nullptr);
  }
  bool named = false;
  for (const std::string& line : logged_lines())
    named |= line.find("not a zcx handle") != std::string::npos;
  EXPECT_TRUE(named) << "the garbage handle's error does not say what it is";
  EXPECT_EQ(d_.close_listen(lc), ncclSuccess);
}

// v11: one init/finalize per communicator over one discovery. Finalizing the second
// communicator must leave the first one working.
TEST_P(PluginTest, PerCommunicatorInitFinalizeShareDiscovery) {
  ASSERT_EQ(d_.init(), ncclSuccess);  // a second communicator (v8..v10: NCCL inits once)
  void *sc, *rc, *lc;
  double max_ms;
  ASSERT_EQ(connect_pair_single_thread(d_, 0, &sc, &rc, &lc, &max_ms), "");
  EXPECT_EQ(d_.close_send(sc), ncclSuccess);
  EXPECT_EQ(d_.close_recv(rc), ncclSuccess);
  EXPECT_EQ(d_.close_listen(lc), ncclSuccess);
  ASSERT_EQ(d_.finalize(), ncclSuccess);
  int ndev = 0;
  ASSERT_EQ(d_.devices(&ndev), ncclSuccess);
  EXPECT_GE(ndev, 1);
  ASSERT_EQ(connect_pair_single_thread(d_, 0, &sc, &rc, &lc, &max_ms), "")
      << "the first communicator's context stopped working after the second's finalize";
  EXPECT_EQ(d_.close_send(sc), ncclSuccess);
  EXPECT_EQ(d_.close_recv(rc), ncclSuccess);
  EXPECT_EQ(d_.close_listen(lc), ncclSuccess);
}

TEST_P(PluginTest, DlcloseThenReloadLeavesNothingBehind) {
  const Case& c = GetParam();
  ASSERT_EQ(d_.finalize(), ncclSuccess);
  d_.unload();
  int threads_before = count_threads();
  for (int round = 0; round < 2; ++round) {
    NetDriver d;
    std::string why, skip;
    ASSERT_TRUE(open_plugin(c, &d, &why, &skip)) << why << skip;
    void *sc, *rc, *lc;
    double max_ms;
    ASSERT_EQ(connect_pair_single_thread(d, 0, &sc, &rc, &lc, &max_ms), "") << "round " << round;
    EXPECT_EQ(d.close_send(sc), ncclSuccess);
    EXPECT_EQ(d.close_recv(rc), ncclSuccess);
    EXPECT_EQ(d.close_listen(lc), ncclSuccess);
    EXPECT_EQ(d.finalize(), ncclSuccess);
    d.unload();
    EXPECT_EQ(dlopen(c.variant.path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD), nullptr)
        << "the plugin stayed mapped after dlclose (a thread, atexit or nodelete holds it)";
    EXPECT_EQ(count_threads(), threads_before) << "a plugin thread outlived dlclose";
  }
  std::string why, skip;
  ASSERT_TRUE(open_plugin(c, &d_, &why, &skip)) << why << skip;  // for TearDown's finalize
}

// No exception crosses into NCCL: a provider that throws yields ncclInternalError and a WARN.
class FirewallTest : public PluginTest {};

TEST_P(FirewallTest, ExceptionFromProviderBecomesInternalError) {
  void *sc, *rc, *lc;
  double max_ms;
  ASSERT_EQ(connect_pair_single_thread(d_, 0, &sc, &rc, &lc, &max_ms), "");
  char byte = 0;
  void* req = nullptr;
  ncclResult_t r = ncclSuccess;
  for (int i = 0; i < 10 && r == ncclSuccess; ++i)  // the fake may first ask for a retry
    r = d_.isend(sc, &byte, 1, -424242, nullptr, &req);
  EXPECT_EQ(r, ncclInternalError);
  EXPECT_EQ(req, nullptr);
  bool logged = false;
  for (const std::string& line : logged_lines())
    logged |= line.find("isend: internal error: fake provider: thrown on purpose") != std::string::npos;
  EXPECT_TRUE(logged);
  EXPECT_EQ(d_.close_send(sc), ncclSuccess);
  EXPECT_EQ(d_.close_recv(rc), ncclSuccess);
  EXPECT_EQ(d_.close_listen(lc), ncclSuccess);
}

INSTANTIATE_TEST_SUITE_P(AllVersions, PluginTest, testing::ValuesIn(all_cases()), case_name);

std::vector<Case> fake_cases() {
  std::vector<Case> out;
  for (const Case& c : all_cases())
    if (std::string(c.variant.label) == "fake") out.push_back(c);
  return out;
}
INSTANTIATE_TEST_SUITE_P(FakeProvider, FirewallTest, testing::ValuesIn(fake_cases()), case_name);

}  // namespace
}  // namespace zcx::plugin_test
