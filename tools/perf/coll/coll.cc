#include "coll/coll.h"

#include "coll/data.h"
#include "coll/device.h"
#include "coll/measure.h"
#include "coll/ops.h"
#include "coll/options.h"
#include "coll/output.h"
#include "common/config.h"
#include "engine/sweep.h"

#include <zcx/coll.h>

#include <algorithm>
#include <cstdlib>

namespace zcx::perf {
namespace {

// Owns the communicator: destroyed after a clean run, aborted (bounded) after a failure.
class CommGuard {
 public:
  ~CommGuard() {
    if (comm == nullptr) return;
    if (failed) (void)zcx_comm_abort(comm);
    else (void)zcx_comm_destroy(comm);
  }
  zcx_comm_t comm = nullptr;
  bool failed = true;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "zcx-perf coll: %s\n", message.c_str());
  return 1;
}

std::string describe_setting(const char* name, const char* fallback) {
  const config::ParamBase* p = config::find(name);
  std::optional<std::string> raw = p ? p->raw() : std::nullopt;
  return raw && !raw->empty() ? std::string(name) + "=" + *raw : fallback;
}

bool same_arguments(zcx_comm_t comm, const std::vector<std::string>& args, std::string* error) {
  uint64_t lo = command_fingerprint(args), hi = lo;
  if (zcx_allreduce(&lo, &lo, 1, ZCX_UINT64, ZCX_MIN, comm, nullptr) != ZCX_SUCCESS ||
      zcx_allreduce(&hi, &hi, 1, ZCX_UINT64, ZCX_MAX, comm, nullptr) != ZCX_SUCCESS) {
    *error = std::string("the first collective (comparing the options of the ranks) failed: ") +
             zcx_get_last_error();
    return false;
  }
  if (lo != hi) *error = "the ranks got different options; every rank must get the same ones";
  return lo == hi;
}

size_t buffer_bytes(const CollOp& op, const std::vector<size_t>& sizes, zcx_dtype_t dtype,
                    int nranks) {
  size_t es = zcx_dtype_size(dtype), most = 0;
  for (size_t s : sizes) {
    CollShape shape = op.shape(s / es, static_cast<size_t>(nranks));
    most = std::max(most, std::max(shape.send, shape.recv) * es);
  }
  return most;
}

bool measure_size(const Placement& base, const MeasureSettings& s, size_t index,
                  const CollBuffers& b, SizeResult* row, std::string* error) {
  size_t es = zcx_dtype_size(base.call.dtype);
  row->size = std::max(base.shape.send, base.shape.recv) * es;
  row->count = base.shape.param;
  row->iters = s.iters;
  Placement p = base;
  for (bool in_place : {false, true}) {
    p.in_place = in_place;
    uint64_t seed = mix(index * 2 + (in_place ? 1 : 0));
    if (!measure_placement(p, s, seed, b, in_place ? &row->in_place : &row->out_of_place, error))
      return false;
  }
  p.in_place = false;
  return s.overlap_poll_us < 0 || measure_overlap(p, s, b, &row->overlap, error);
}

struct Job {
  const CollOptions* o;
  const CollOp* op;
  zcx_comm_t comm;
  int rank, nranks;
  const Device* device;  // nullptr: host buffers
};

bool run_sizes(const Job& job, CollRun* run, std::string* error) {
  std::vector<size_t> sizes = coll_sizes(*job.o);
  CollBuffers buffers;
  size_t bytes = buffer_bytes(*job.op, sizes, job.o->dtype, job.nranks);
  if (!buffers.allocate(bytes, job.device)) {
    *error = "cannot allocate 2 x " + std::to_string(bytes) + " bytes for the buffers" +
             (job.device ? " (on the host and on the device)" : "");
    return false;
  }
  Placement p;
  p.op = job.op;
  p.call = {job.comm, job.rank, job.nranks, job.o->dtype, job.o->redop, job.o->root,
            job.device ? job.device->stream() : nullptr};
  MeasureSettings s{job.o->sweep.iters, job.o->sweep.warmup, job.o->sweep.reps, job.o->check,
                    job.o->overlap_poll_us};
  if (job.rank == 0) print_table_header(stdout, *run);
  for (size_t i = 0; i < sizes.size(); ++i) {
    p.shape = job.op->shape(sizes[i] / zcx_dtype_size(job.o->dtype), static_cast<size_t>(job.nranks));
    SizeResult row;
    if (!measure_size(p, s, i, buffers, &row, error)) return false;
    if (job.rank == 0) print_table_row(stdout, *run, row);
    run->rows.push_back(row);
  }
  if (job.rank == 0) print_table_footer(stdout, *run);
  return true;
}

// Applies --provider and --algo: the registry reads the environment when a value is used,
// so setting it before the communicator exists is enough.
void apply_overrides(const CollOptions& o) {
  if (!o.provider.empty()) setenv("ZCX_PROVIDERS", o.provider.c_str(), 1);
  if (!o.algo.empty()) setenv("ZCX_ALGO", o.algo.c_str(), 1);
}

// --device: "host", or the GPU with ZCX_GPU_STAGING and ZCX_GPU_ASYNC where set.
std::string describe_device(const CollOptions& o, const Device& device) {
  if (!o.gpu) return "host";
  std::string out = "gpu: " + device.description();
  for (const char* name : {"ZCX_GPU_STAGING", "ZCX_GPU_ASYNC"}) {
    const char* v = std::getenv(name);
    if (v && *v) out += std::string(", ") + name + "=" + v;
  }
  return out;
}

int run(const CollOptions& o, const std::vector<std::string>& args) {
  apply_overrides(o);
  // Before the communicator (it is destroyed first): device 0 is current when it is created.
  Device device;
  std::string error;
  if (o.gpu && !device.open(&error)) return fail(error);
  CommGuard guard;
  if (zcx_comm_init_env(&guard.comm, nullptr) != ZCX_SUCCESS)
    return fail(std::string("cannot create the communicator: ") + zcx_get_last_error());
  Job job{&o, find_coll_op(o.op.c_str()), guard.comm, 0, 0, o.gpu ? &device : nullptr};
  (void)zcx_comm_rank(guard.comm, &job.rank);
  (void)zcx_comm_nranks(guard.comm, &job.nranks);
  if (job.op->rooted && o.root >= job.nranks)
    return fail("-r " + std::to_string(o.root) + " is not a rank of this " +
                std::to_string(job.nranks) + "-rank job");
  if (!same_arguments(guard.comm, args, &error)) return fail(error);
  CollRun result{&o, job.nranks, describe_device(o, device),
                 describe_setting("ZCX_PROVIDERS", "default (shm within a host, else ib, ucx, tcp)"),
                 describe_setting("ZCX_ALGO", "auto (cost model)"), {}};
  if (!run_sizes(job, &result, &error)) return fail(error);
  guard.failed = false;
  if (job.rank == 0 && !o.sweep.json_path.empty() &&
      !write_coll_json(o.sweep.json_path, result, &error))
    return fail(error);
  return total_wrong(result) == 0 ? 0 : 1;  // as nccl-tests: wrong results fail the run
}

}  // namespace

void coll_usage(FILE* to) {
  std::fprintf(to,
      "usage: zcx-run -np N -- zcx-perf coll <op> [options]     (or under mpirun)\n"
      "\n"
      "Collective benchmark in the manner of nccl-tests, over the zcx collectives API.\n"
      "<op>: allreduce broadcast reduce allgather reducescatter alltoall sendrecv (also as\n"
      "      nccl-tests spells them: all_reduce, all_gather, reduce_scatter)\n"
      "For each size (bytes, as nccl-tests counts them: the total gathered/scattered size for\n"
      "allgather, reducescatter and alltoall) and for out-of-place then in-place buffers: -w\n"
      "warm-up calls, then --reps repetitions of -n calls. time = each rank's mean per call,\n"
      "averaged over the ranks; algbw = size / time; busbw = algbw * 2(n-1)/n (allreduce),\n"
      "(n-1)/n (allgather, reducescatter, alltoall) or 1 (broadcast, reduce, sendrecv).\n"
      "Printed: the median over the reps, and busbw's min and max. With -c 1 one more call\n"
      "is checked element by element (#wrong, summed over the ranks; nonzero fails the run).\n"
      "\n"
      "  -b, --minbytes SIZE     smallest size (default 8; K, M, G suffixes)\n"
      "  -e, --maxbytes SIZE     largest size (default 64M)\n"
      "  -f, --stepfactor F      multiply the size by F between steps (default 2; 1: use -i)\n"
      "  -i, --stepbytes SIZE    add SIZE between steps (when -f is 1 or not given)\n"
      "  -n, --iters N           calls per repetition (default 20)\n"
      "  -w, --warmup_iters N    warm-up calls per size and placement (default 5)\n"
      "  -c, --check 0|1         check the results (default 1)\n"
      "  -o, --op OP             sum prod min max avg (default sum)\n"
      "  -d, --datatype TYPE     int8 uint8 int32 uint32 int64 uint64 half bfloat16 float\n"
      "                          double (also float16, float32, float64; default float)\n"
      "  -r, --root R            root of broadcast and reduce (default 0)\n"
      "  --reps R                repetitions per size (default 5)\n"
      "  --json FILE             rank 0 also writes the results as JSON (docs/PERF_JSON.md)\n"
      "  --provider NAMES        ZCX_PROVIDERS for this run, e.g. tcp to use tcp between\n"
      "                          local ranks (default: shm within a host). Collectives of\n"
      "                          ranks on one host still take the shared lane, whatever\n"
      "                          the provider, unless ZCX_COLL_SHARED_LANE=0\n"
      "  --algo NAME             ZCX_ALGO for this run, e.g. ring or allreduce:rhd\n"
      "  --device host|gpu       where the buffers are (default host). gpu: cudaMalloc on\n"
      "                          CUDA device 0 (every rank), each call on a CUDA stream; a\n"
      "                          repetition's -n calls are timed up to cudaStreamSynchronize;\n"
      "                          inputs and results are copied to and from the host (not\n"
      "                          timed)\n"
      "  --overlap POLL_US       also measure how much of the request form (zcx_i*, host\n"
      "                          buffers, out of place) hides behind computation, as the\n"
      "                          OSU benchmarks do: pure = post then wait; total = post,\n"
      "                          compute for the pure time with a zcx_coll_test every\n"
      "                          POLL_US of it (0: never; the tests' own time is not\n"
      "                          computation), wait; ovl = 100 * (1 - (total - pure) /\n"
      "                          pure). Five more columns: pure, total, ovl median/min/max\n"
      "  -h, --help              this text\n"
      "\n"
      "Example: zcx-run -np 4 -- zcx-perf coll allreduce -b 8 -e 64M -f 8 --json ar.json\n");
}

int coll_main(std::vector<std::string> args) {
  for (const std::string& a : args)
    if (a == "-h" || a == "--help") {
      coll_usage(stdout);
      return 0;
    }
  CollOptions o;
  std::string error = parse_coll_options(args, &o);
  if (!error.empty()) {
    std::fprintf(stderr, "zcx-perf coll: %s (see zcx-perf coll --help)\n", error.c_str());
    return 2;
  }
  return run(o, args);
}

}  // namespace zcx::perf
