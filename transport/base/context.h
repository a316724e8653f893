// Context: one rank's view of a job — its bootstrap, the providers it uses, and lazily made
// endpoints to peers. Both the public C API (zcx.h) and collectives/ use it; collectives see
// providers only through this interface.
#pragma once

#include "base/activity_server.h"
#include "base/departures.h"
#include "base/provider.h"
#include "common/bootstrap/bootstrap.h"
#include "common/status.h"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace zcx {

class Request;  // opaque: a provider request plus bookkeeping; freed when test says done

// A bidirectional link to one peer over one provider (a send comm and a recv comm).
class Endpoint {
 public:
  virtual ~Endpoint() = default;
  virtual int peer() const = 0;
  virtual const zcx_provider_ops_t* provider() const = 0;
  // Messages match in posting order per direction. The context registers the buffer where
  // the provider needs it (see Context::mem_register). *req is never null on success.
  virtual Status isend(const void* buf, size_t size, int tag, Request** req) = 0;
  virtual Status irecv(void* buf, size_t size, int tag, Request** req) = 0;
  // Whether the *_device calls take CUDA device memory here without staging: cuda_ipc, or a
  // provider whose device registers GPU memory (GPUDirect RDMA: ib with nvidia_peermem or
  // dmabuf, UCX built with CUDA).
  virtual bool moves_device_memory() const { return false; }
  // isend/irecv on device memory: registered as ZCX_MEM_CUDA where the provider needs a
  // registration, and a receive completes only after the provider's iflush where its device
  // asks for one. Default: kUnsupported.
  virtual Status isend_device(const void* buf, size_t size, int tag, Request** req);
  virtual Status irecv_device(void* buf, size_t size, int tag, Request** req);
};

// What Context::create uses instead of the defaults (tests inject fake providers and host
// identities through it).
struct ContextOptions {
  std::vector<const zcx_provider_ops_t*> providers;  // empty: providers_selected()
  std::string host_identity;                         // empty: host name + kernel boot id
};

class Context {
 public:
  virtual ~Context() = default;
  // Takes ownership of the bootstrap. Listens on every selected provider that has a device
  // and allgathers the handles and host identities; connections are made on first use.
  // Collective over all ranks. The methods below may be called from several threads (they
  // are serialised inside); abort() may be called at any time from any thread.
  static Status create(std::unique_ptr<Bootstrap> bs, std::unique_ptr<Context>* out);
  static Status create(std::unique_ptr<Bootstrap> bs, const ContextOptions& options,
                       std::unique_ptr<Context>* out);

  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  virtual Bootstrap& bootstrap() = 0;
  // The endpoint to `peer`, connecting if needed (bounded by ZCX_TIMEOUT). provider: "" for
  // the ZCX_PROVIDERS order, else that provider only.
  virtual Status endpoint(int peer, Endpoint** ep, const std::string& provider = "") = 0;
  // Whether `provider` is open on both sides and can reach `peer` (endpoint would not fail
  // for want of a provider). Sets no error.
  virtual bool reaches(int peer, const std::string& provider) const {
    (void)peer, (void)provider;
    return false;
  }
  // done=true frees the request; *size gets the bytes moved.
  virtual Status test(Request* req, bool* done, size_t* size) = 0;
  // Bounded by ZCX_TIMEOUT; on a timeout the request stays valid (test it again, or abort).
  virtual Status wait(Request* req, size_t* size) = 0;
  // Drives all endpoints and pending accepts; collectives call it while they wait.
  virtual Status progress() = 0;
  // Tests every other posted request once, keeping what completes for its own test. Like
  // MPI_Wait, waiting on one request moves the rest: a caller that waits on its receive
  // before its send must not stall that send, which its peer's receive may be waiting for.
  virtual Status progress_requests(const Request* except) {
    (void)except;
    return Status::kSuccess;
  }
  // Whether req is still owned by the caller (not completed, not freed after an error).
  virtual bool request_live(const Request* req) const = 0;
  virtual void abort() = 0;
  // What this rank is doing, and what the ranks of its host are (base/departures.h): the
  // collectives note their calls, completions and polls there, and read which ranks of this
  // host finalized cleanly (Departures::left). Null where the context keeps no page (the
  // tests' fakes).
  virtual Departures* departures() { return nullptr; }
  // What `peers` (ranks of other hosts) are doing, asked at once and answered within
  // timeout_ms in all (base/activity_server.h); one answer per peer (refused where the job
  // has one host: nobody answers). Empty where the context cannot ask (the tests' fakes).
  virtual std::vector<PeerActivity> ask_activity(const std::vector<int>& peers, int timeout_ms) {
    (void)peers, (void)timeout_ms;
    return {};
  }
  // A failure above the transport (a communicator's error): when this context finalizes,
  // its rank does not count as leaving cleanly, so peers stalled behind it name it at once.
  virtual void mark_unclean() {}
  // Memory registration (providers that need one, ib): a transfer inside a range registered
  // here, or held below, uses one registration of the whole range per connection, made at
  // its first use and kept until the range is deregistered or released. Any other transfer
  // is registered for its own life only: a cached registration of memory the caller has
  // since freed would still name the old pages, and data would land there (or be read from
  // there) while the call reports success.
  virtual Status mem_register(void* buf, size_t size) = 0;
  virtual Status mem_deregister(void* buf, size_t size) = 0;
  // A hold: mem_register for the span of one operation (the collectives' buffers), counted,
  // so several operations may hold one range. Releasing drops the range's registrations once
  // no request uses them.
  virtual void hold_range(const void* buf, size_t size) { (void)buf, (void)size; }
  virtual void release_range(const void* buf, size_t size) { (void)buf, (void)size; }
};

}  // namespace zcx
