// ZCX_SHM_* variables.
#include "common/config.h"
#include "common/log.h"
#include "shm/shm.h"

#include <cstring>

namespace zcx::shm {
namespace {

const config::StringParam large{"ZCX_SHM_LARGE", "auto",
    "Large-message path of the shm provider: pipeline (copy-in/copy-out through shared "
    "chunks, both cores copy at once), cma (single copy with process_vm_readv/writev, split "
    "between both processes) or auto (where CMA is permitted: from ZCX_SHM_ADAPT_MIN up, "
    "whichever of the two copied messages of that size faster lately on the connection; "
    "CMA from ZCX_SHM_CMA_THRESHOLD up)."};
const config::SizeParam cma_threshold_param{"ZCX_SHM_CMA_THRESHOLD", size_t(1) << 62,
    "With ZCX_SHM_LARGE=auto, messages of at least this size always use CMA (default: "
    "never; the copy rates decide)."};
const config::SizeParam adapt_min_param{"ZCX_SHM_ADAPT_MIN", 0,
    "With ZCX_SHM_LARGE=auto, messages of at least this size go by CMA or the pipeline, "
    "whichever copied that size faster lately on the connection; smaller ones are "
    "pipelined. 0: larger than the chunk ring (ZCX_SHM_CHUNKS x ZCX_SHM_CHUNK_BYTES), so "
    "that a send that fits the ring never waits for the receiver (a CMA send does)."};
const config::IntParam nslots{"ZCX_SHM_SLOTS", 64,
    "Slots in each shm connection's message ring (power of two).", 2, 4096};
const config::SizeParam slot_bytes{"ZCX_SHM_SLOT_BYTES", 4096,
    "Bytes per ring slot (multiple of 64); messages up to this minus 32 go inline.", 128,
    1u << 20};
const config::IntParam nchunks{"ZCX_SHM_CHUNKS", 8,
    "Chunks in each shm connection's large-message pipeline (power of two).", 2, 64};
const config::SizeParam chunk_bytes{"ZCX_SHM_CHUNK_BYTES", 256 * 1024,
    "Bytes per pipeline chunk (multiple of 4096).", 4096, 64u << 20};
const config::SizeParam stream_min{"ZCX_SHM_NT_MIN", 16u << 20,
    "Pipelined messages streaming together (an interleave group) are copied out with "
    "non-temporal stores when each writes a buffer of its own and together they write at "
    "least this many bytes (cached stores would only evict the caches)."};
const config::StringParam stream{"ZCX_SHM_STREAM", "auto",
    "How pipelined messages are cut into the chunk ring: coarse (ZCX_SHM_CHUNK_BYTES "
    "chunks over the whole ring), fine (16 KiB chunks over a quarter of it: faster while "
    "the two processes' CPUs share a cache, slower while they do not) or auto (each "
    "interleave group takes the cut the receiver drained faster lately on the connection)."};
const config::IntParam spin{"ZCX_SHM_SPIN", 2000,
    "Idle polls of an shm request before each further poll yields the CPU (sched_yield).",
    0, 1 << 30};

// Which of `a`, `b` or "auto" (2, also for anything else, with a warning) the value is.
int three_way(const config::StringParam& p, const char* a, const char* b) {
  const std::string v = p.get();
  if (v == a) return 0;
  if (v == b) return 1;
  if (v != "auto")
    ZCX_WARN(kLogShm, "%s=%s: expected %s, %s or auto", p.name(), v.c_str(), a, b);
  return 2;
}

}  // namespace

LargeMode large_mode() {
  const LargeMode modes[] = {LargeMode::kCma, LargeMode::kPipeline, LargeMode::kAuto};
  return modes[three_way(large, "cma", "pipeline")];
}
StreamCut stream_cut() {
  const StreamCut cuts[] = {StreamCut::kFine, StreamCut::kCoarse, StreamCut::kAuto};
  return cuts[three_way(stream, "fine", "coarse")];
}
size_t cma_threshold() { return cma_threshold_param.get(); }
size_t cfg_adapt_min() { return adapt_min_param.get(); }
uint32_t cfg_nslots() { return static_cast<uint32_t>(nslots.get()); }
uint32_t cfg_slot_bytes() { return static_cast<uint32_t>(slot_bytes.get()); }  // <= 1M
uint32_t cfg_nchunks() { return static_cast<uint32_t>(nchunks.get()); }
uint32_t cfg_chunk_bytes() { return static_cast<uint32_t>(chunk_bytes.get()); }  // <= 64M
size_t cfg_stream_min() { return stream_min.get(); }
uint32_t cfg_spin_before_yield() { return static_cast<uint32_t>(spin.get()); }

}  // namespace zcx::shm
