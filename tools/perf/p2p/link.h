// A benchmark link between this rank and one peer over one provider, used through the
// provider ops table directly (no context, no registration cache): a send comm to the
// peer, a recv comm from it, and one registered send and receive buffer each.
#pragma once

#include "base/provider.h"
#include "common/bootstrap/bootstrap.h"
#include "common/status.h"

#include <cstddef>
#include <memory>
#include <string>

namespace zcx::perf {

class Link {
 public:
  // Initializes `ops`, listens on device `dev`, exchanges handles with every rank through
  // bs, connects to `peer` and accepts from it, and registers two buffers of buf_bytes.
  static Status open(const zcx_provider_ops_t* ops, int dev, Bootstrap& bs, int peer,
                     size_t buf_bytes, std::unique_ptr<Link>* out);
  ~Link();
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  const zcx_device_props_t& props() const { return props_; }
  unsigned char* send_buf() { return send_buf_.get(); }
  unsigned char* recv_buf() { return recv_buf_.get(); }
  const std::string& peer_name() const { return peer_name_; }

  // Post one message from/into the registered buffer. *req is null when the provider
  // asks to retry later.
  Status try_isend(size_t bytes, void** req);
  Status try_irecv(size_t bytes, void** req);
  // Posts, retrying until the provider accepts it (bounded by ZCX_TIMEOUT).
  Status isend(size_t bytes, void** req);
  Status irecv(size_t bytes, void** req);
  // One test; *bytes gets the size moved when done.
  Status test(void* req, bool* done, size_t* bytes);
  // Tests until done (bounded by ZCX_TIMEOUT); *bytes may be null.
  Status wait(void* req, size_t* bytes);
  // Tests both requests in turn until both are done: a provider may progress only the
  // request it tests, so waiting for a send alone while the peer does the same could
  // deadlock once both sends fill the socket buffers.
  Status wait_both(void* send_req, void* recv_req, size_t* recv_bytes);

 private:
  struct FreeDeleter {
    void operator()(unsigned char* p) const;
  };
  Link() = default;
  Status init_provider(const zcx_provider_ops_t* ops, int dev, Bootstrap& bs);
  Status connect_peer(Bootstrap& bs, int peer);
  Status register_buffers(size_t bytes);
  Status post_until_accepted(bool send, size_t bytes, void** req);

  const zcx_provider_ops_t* ops_ = nullptr;
  void* ctx_ = nullptr;
  int dev_ = 0;
  int64_t timeout_ms_ = 0;  // ZCX_TIMEOUT
  zcx_device_props_t props_{};
  std::string peer_name_;
  void* listen_comm_ = nullptr;
  void* send_comm_ = nullptr;
  void* recv_comm_ = nullptr;
  std::unique_ptr<unsigned char, FreeDeleter> send_buf_, recv_buf_;
  void* send_mr_ = nullptr;
  void* recv_mr_ = nullptr;
};

}  // namespace zcx::perf
