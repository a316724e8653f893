// ZCX_IB_* variables (names mirror NCCL_IB_* where one exists).
#include "ib/ib.h"

namespace zcx::ib::params {

const config::StringParam library{"ZCX_IB_LIBRARY", "libibverbs.so.1",
    "The libibverbs shared object the ib provider dlopens. A name that cannot be loaded "
    "leaves the provider with no devices (used by the tests to simulate a host without "
    "rdma-core)."};
const config::StringParam hca{"ZCX_IB_HCA", "",
    "RDMA devices to use, as NCCL_IB_HCA: a prefix list such as mlx5_0,mlx5_1; entries may "
    "name a port (mlx5_0:1); ^ excludes the listed ones; = matches names exactly."};
const config::IntParam gid_index{"ZCX_IB_GID_INDEX", -1,
    "RoCE GID index. -1 picks one: a RoCE v2 IPv4-mapped GID, else any valid GID that is "
    "not link-local.", -1, 1024};
const config::IntParam qps{"ZCX_IB_QPS", 1,
    "Queue pairs per connection (NCCL_IB_QPS_PER_CONNECTION).", 1, kMaxQps};
const config::BoolParam split{"ZCX_IB_SPLIT_DATA_ON_QPS", false,
    "Split every message over all queue pairs in 128-byte-aligned chunks; off sends whole "
    "messages round-robin over the queue pairs."};
const config::IntParam timeout{"ZCX_IB_TIMEOUT", 20,
    "QP local ACK timeout exponent: each try waits 4.096 us * 2^value (20 is about 4.3 s).",
    1, 31};
const config::IntParam retry_cnt{"ZCX_IB_RETRY_CNT", 7,
    "Retransmissions before a work request fails with 'retries exhausted' (status 12).",
    0, 7};
const config::SizeParam inline_bytes{"ZCX_IB_INLINE", 64,
    "Messages up to this size are sent inline in the work request (no DMA of the source); "
    "0 disables."};
const config::BoolParam poll_yield{"ZCX_IB_POLL_YIELD", false,
    "Yield the CPU (sched_yield) when a poll finds nothing. Helps Soft-RoCE (rxe), whose "
    "kernel work competes with busy-polling processes for the CPU; the rdma-vm runner sets "
    "it. Leave off on real NICs."};
const config::StringParam test_corrupt_cts{"ZCX_IB_TEST_CORRUPT_CTS", "",
    "Test hook, never for production: the receiver corrupts the clear-to-send entries it "
    "sends: rkey (wrong key), addr (64 bytes before the buffer), size (claims 4 KiB more "
    "than posted), seq (wrong sequence number)."};

}  // namespace zcx::ib::params
