// A tcp peer killed with SIGKILL in the middle of a large transfer: the survivor's test()
// must fail with kRemote naming the peer within ZCX_TIMEOUT + 2 s, whichever side it is on.
#include "base/registry.h"
#include "common/clock.h"
#include "common/config.h"
#include "transport/provider_util.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

namespace zcx::test {
namespace {

constexpr size_t kBig = size_t{2} << 30;  // far more than socket buffers hold
constexpr int kTimeoutS = 5;

// Uninitialised: untouched pages cost nothing until the transfer writes them.
std::unique_ptr<char[]> big_buffer() { return std::unique_ptr<char[]>(new char[kBig]); }

// Child, sender role: connects to `handle` as rank 1 and streams a huge message until killed.
[[noreturn]] void child_send(const zcx_provider_ops_t* ops, const char* handle) {
  ProviderCtx me;
  if (me.init(ops, 1, 2, 77) != ZCX_SUCCESS) _exit(2);
  void* send = nullptr;
  Deadline dl = Deadline::after_ms(10000);
  while (send == nullptr && !dl.expired())
    if (ops->connect(me.ctx, 0, handle, &send) != ZCX_SUCCESS) _exit(3);
  auto buf = big_buffer();
  void* req = nullptr;
  if (send == nullptr || post_send(ops, send, buf.get(), kBig, 0, nullptr, &req) != ZCX_SUCCESS)
    _exit(4);
  std::vector<void*> reqs{req};
  (void)wait_requests(ops, reqs, nullptr, 600000);
  pause();
  _exit(0);
}

// Child, receiver role: accepts on the listener inherited across fork, then never reads,
// so the parent's large send stalls in the middle.
[[noreturn]] void child_accept_and_stall(const zcx_provider_ops_t* ops, void* listen) {
  void* recv = nullptr;
  Deadline dl = Deadline::after_ms(10000);
  while (recv == nullptr && !dl.expired())
    if (ops->accept(listen, &recv) != ZCX_SUCCESS) _exit(3);
  pause();
  _exit(0);
}

class TcpPeerDeath : public ::testing::Test {
 protected:
  void SetUp() override {
    ops_ = provider_find("tcp");
    ASSERT_NE(ops_, nullptr);
    ASSERT_EQ(me_.init(ops_, 0, 2, 77), ZCX_SUCCESS);
  }
  void TearDown() override {
    if (child_ > 0) {
      kill(child_, SIGKILL);
      waitpid(child_, nullptr, 0);
    }
  }
  // Drives `req` until it fails; returns the status and the elapsed milliseconds since kill.
  zcx_status_t wait_failure(void* req, int64_t* ms_after_kill) {
    zcx_status_t st = ZCX_SUCCESS;
    int done = 0;
    int64_t t_kill = 0;
    Deadline dl = Deadline::after_ms((kTimeoutS + 10) * 1000);
    while (st == ZCX_SUCCESS && !done && !dl.expired()) {
      st = ops_->test(req, &done, nullptr);
      if (t_kill == 0 && now_ms() - t_start_ > 50) {  // mid-transfer by now
        kill(child_, SIGKILL);
        t_kill = now_ms();
      }
    }
    *ms_after_kill = now_ms() - t_kill;
    return st;
  }

  const zcx_provider_ops_t* ops_ = nullptr;
  ProviderCtx me_;
  pid_t child_ = -1;
  int64_t t_start_ = 0;
};

TEST_F(TcpPeerDeath, ReceiverSeesSenderDie) {
  config::ScopedOverride timeout("ZCX_TIMEOUT", std::to_string(kTimeoutS));
  char handle[ZCX_HANDLE_BYTES];
  void* listen = nullptr;
  ASSERT_EQ(ops_->listen(me_.ctx, 0, handle, &listen), ZCX_SUCCESS);
  child_ = fork();
  ASSERT_GE(child_, 0);
  if (child_ == 0) child_send(ops_, handle);
  void* recv = nullptr;
  Deadline dl = Deadline::after_ms(10000);
  while (recv == nullptr && !dl.expired())
    ASSERT_EQ(ops_->accept(listen, &recv), ZCX_SUCCESS) << zcx_get_last_error();
  ASSERT_NE(recv, nullptr) << "child never connected";
  auto buf = big_buffer();
  void* data = buf.get();
  size_t cap = kBig;
  int tag = 0;
  void* req = nullptr;
  ASSERT_EQ(post_recv(ops_, recv, 1, &data, &cap, &tag, nullptr, &req), ZCX_SUCCESS);
  t_start_ = now_ms();
  int64_t ms = 0;
  EXPECT_EQ(wait_failure(req, &ms), ZCX_ERR_REMOTE) << zcx_get_last_error();
  EXPECT_LT(ms, (kTimeoutS + 2) * 1000);
  std::string err = zcx_get_last_error();
  EXPECT_NE(err.find("rank 1"), std::string::npos) << err;
  EXPECT_NE(err.find("pid " + std::to_string(child_)), std::string::npos) << err;
  (void)ops_->close_recv(recv);
  (void)ops_->close_listen(listen);
}

TEST_F(TcpPeerDeath, SenderSeesReceiverDie) {
  config::ScopedOverride timeout("ZCX_TIMEOUT", std::to_string(kTimeoutS));
  char handle[ZCX_HANDLE_BYTES];
  void* listen = nullptr;
  ASSERT_EQ(ops_->listen(me_.ctx, 0, handle, &listen), ZCX_SUCCESS);
  child_ = fork();
  ASSERT_GE(child_, 0);
  if (child_ == 0) child_accept_and_stall(ops_, listen);
  void* send = nullptr;
  Deadline dl = Deadline::after_ms(10000);
  while (send == nullptr && !dl.expired())
    ASSERT_EQ(ops_->connect(me_.ctx, 0, handle, &send), ZCX_SUCCESS) << zcx_get_last_error();
  ASSERT_NE(send, nullptr);
  auto buf = big_buffer();
  void* req = nullptr;
  ASSERT_EQ(post_send(ops_, send, buf.get(), kBig, 0, nullptr, &req), ZCX_SUCCESS);
  t_start_ = now_ms();
  int64_t ms = 0;
  EXPECT_EQ(wait_failure(req, &ms), ZCX_ERR_REMOTE) << zcx_get_last_error();
  EXPECT_LT(ms, (kTimeoutS + 2) * 1000);
  std::string err = zcx_get_last_error();
  // The send comm's peer is the listener's process: this one (the child inherited it).
  EXPECT_NE(err.find("rank 0"), std::string::npos) << err;
  EXPECT_NE(err.find("send"), std::string::npos) << err;
  (void)ops_->close_send(send);
  (void)ops_->close_listen(listen);
}

}  // namespace
}  // namespace zcx::test
