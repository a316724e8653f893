// Where the ranks of a job come from. Checked in this order (the first that is present wins):
//   ZCX_RANK/ZCX_NRANKS/ZCX_ROOT[/ZCX_SECRET]      zcx-run or by hand
//   RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT          torchrun; zcx's root is MASTER_PORT+1
//                                                    because torch's TCPStore owns MASTER_PORT
//   OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK             mpirun (root address from ZCX_ROOT)
//   SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID          srun   (root address from ZCX_ROOT)
// ZCX_ROOT, when set, overrides the root address of every launcher. The job secret is
// ZCX_SECRET, else derived from the launcher's job id (weaker: anyone who can read the job id
// can derive it), else an error.
#include "common/bootstrap/bootstrap.h"
#include "common/bootstrap/bootstrap_internal.h"
#include "common/check.h"
#include "common/config_vars.h"

#include <cstdlib>
#include <cstring>

namespace zcx {
namespace {

// Launcher variables are not ZCX_ names, so they are read directly.
std::optional<std::string> env(const char* name) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

Status env_int(const char* name, const std::string& text, int64_t min, int* out) {
  auto v = config::parse_int(text);
  if (!v || *v < min || *v > (1 << 24))
    return set_error(Status::kInvalidArg, kLogBootstrap,
                     "%s='%.32s' is not a valid integer >= %lld", name, text.c_str(),
                     static_cast<long long>(min));
  *out = static_cast<int>(*v);
  return Status::kSuccess;
}

Status env_int_var(const char* name, int64_t min, int* out) {
  auto text = env(name);
  if (!text) return set_error(Status::kInvalidArg, kLogBootstrap, "%s is not set", name);
  return env_int(name, *text, min, out);
}

Status root_from(const std::string& text, const char* what, SockAddr* out) {
  Status s = sockaddr_parse(text, out);
  if (ok(s) && out->port() == 0)
    s = set_error(Status::kInvalidArg, kLogBootstrap, "%s '%s' has no port", what, text.c_str());
  return s;
}

// Under mpirun/srun nothing says where rank 0 is: the user must say it with ZCX_ROOT.
Status root_from_zcx_root(const char* launcher, SockAddr* out) {
  std::string root = params::root.get();
  if (root.empty())
    return set_error(Status::kInvalidArg, kLogBootstrap,
                     "launched by %s, but ZCX_ROOT is not set: %s does not tell where rank 0 "
                     "listens. Export ZCX_ROOT=<address of rank 0's host>:<free port> to every "
                     "rank (e.g. mpirun -x ZCX_ROOT=node1:29600), or use zcx-run",
                     launcher, launcher);
  return root_from(root, "ZCX_ROOT", out);
}

Status from_zcx(LaunchInfo* out) {
  auto rank_text = params::rank.raw();
  ZCX_TRY(env_int("ZCX_RANK", rank_text.value_or(""), 0, &out->rank));
  auto n = params::nranks.raw();
  if (!n) return set_error(Status::kInvalidArg, kLogBootstrap, "ZCX_RANK is set but ZCX_NRANKS is not");
  ZCX_TRY(env_int("ZCX_NRANKS", *n, 1, &out->nranks));
  out->local_rank = static_cast<int>(params::local_rank.get());
  out->source = params::run_job_id.get().empty() ? "ZCX_*" : "zcx-run";
  std::string root = params::root.get();
  if (root.empty())
    return set_error(Status::kInvalidArg, kLogBootstrap,
                     "ZCX_RANK is set but ZCX_ROOT (host:port of rank 0) is not");
  return root_from(root, "ZCX_ROOT", &out->id.root);
}

Status from_torchrun(LaunchInfo* out) {
  out->source = "torchrun";
  ZCX_TRY(env_int_var("RANK", 0, &out->rank));
  ZCX_TRY(env_int_var("WORLD_SIZE", 1, &out->nranks));
  if (auto lr = env("LOCAL_RANK")) ZCX_TRY(env_int("LOCAL_RANK", *lr, 0, &out->local_rank));
  if (!params::root.get().empty()) return root_from_zcx_root("torchrun", &out->id.root);
  int port = 0;
  ZCX_TRY(env_int_var("MASTER_PORT", 1, &port));
  if (port >= 65535)
    return set_error(Status::kInvalidArg, kLogBootstrap,
                     "MASTER_PORT=%d leaves no room for zcx's root at MASTER_PORT+1; set ZCX_ROOT",
                     port);
  std::string addr = *env("MASTER_ADDR");
  bool v6 = addr.find(':') != std::string::npos && addr[0] != '[';
  std::string text = (v6 ? "[" + addr + "]" : addr) + ":" + std::to_string(port + 1);
  return root_from(text, "MASTER_ADDR:MASTER_PORT+1", &out->id.root);
}

Status from_mpirun(LaunchInfo* out) {
  out->source = "mpirun";
  ZCX_TRY(env_int_var("OMPI_COMM_WORLD_RANK", 0, &out->rank));
  ZCX_TRY(env_int_var("OMPI_COMM_WORLD_SIZE", 1, &out->nranks));
  if (auto lr = env("OMPI_COMM_WORLD_LOCAL_RANK"))
    ZCX_TRY(env_int("OMPI_COMM_WORLD_LOCAL_RANK", *lr, 0, &out->local_rank));
  return root_from_zcx_root("mpirun", &out->id.root);
}

Status from_srun(LaunchInfo* out) {
  out->source = "srun";
  ZCX_TRY(env_int_var("SLURM_PROCID", 0, &out->rank));
  ZCX_TRY(env_int_var("SLURM_NTASKS", 1, &out->nranks));
  if (auto lr = env("SLURM_LOCALID")) ZCX_TRY(env_int("SLURM_LOCALID", *lr, 0, &out->local_rank));
  return root_from_zcx_root("srun", &out->id.root);
}

// The launcher's id for this job, used to derive a secret when ZCX_SECRET is absent.
std::string launcher_job_id(const std::string& source) {
  if (source == "zcx-run") return params::run_job_id.get();
  if (source == "torchrun") return env("TORCHELASTIC_RUN_ID").value_or("");
  if (source == "mpirun") return env("OMPI_MCA_ess_base_jobid").value_or("");
  if (source == "srun") {
    auto job = env("SLURM_JOB_ID");
    return job ? *job + "." + env("SLURM_STEP_ID").value_or("0") : "";
  }
  return "";
}

Status secret_from_env(LaunchInfo* out) {
  std::string text = params::secret.get();
  if (!text.empty()) return parse_secret(text, &out->id.secret);
  std::string job = launcher_job_id(out->source);
  if (job.empty())
    return set_error(Status::kInvalidArg, kLogBootstrap,
                     "no job secret: set ZCX_SECRET to the same 16 hex digits on every rank "
                     "(zcx-run does this), e.g. ZCX_SECRET=$(od -An -tx8 -N8 /dev/urandom)");
  out->id.secret = derive_secret(out->source + ":" + job + ":" + out->id.root.to_string());
  ZCX_INFO(kLogBootstrap,
           "ZCX_SECRET not set: job secret derived from the %s job id; this is weaker (anyone "
           "who knows the job id can derive it). Set ZCX_SECRET for a random one", out->source.c_str());
  return Status::kSuccess;
}

}  // namespace

Status parse_secret(const std::string& text, uint64_t* out) {
  uint64_t v = 0;
  bool good = !text.empty() && text.size() <= 16;
  for (char c : text) {
    int d = (c >= '0' && c <= '9') ? c - '0'
            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
            : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
    if (d < 0) good = false;
    v = (v << 4) | static_cast<uint64_t>(d < 0 ? 0 : d);
  }
  if (!good || v == 0)
    return set_error(Status::kInvalidArg, kLogBootstrap,
                     "ZCX_SECRET must be 1 to 16 hex digits, not all zero (got %zu characters)",
                     text.size());
  *out = v;
  return Status::kSuccess;
}

uint64_t derive_secret(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64, then a final avalanche (splitmix64)
  for (unsigned char c : "zcx-job-secret:" + text) h = (h ^ c) * 0x100000001b3ull;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h == 0 ? 1 : h;
}

namespace {

enum class Launcher { kNone, kZcx, kTorchrun, kMpirun, kSrun };

// The first launcher whose variables are set, in this order.
Launcher detect_launcher() {
  if (params::rank.raw()) return Launcher::kZcx;
  if (env("RANK") && env("WORLD_SIZE") && env("MASTER_ADDR")) return Launcher::kTorchrun;
  if (env("OMPI_COMM_WORLD_RANK")) return Launcher::kMpirun;
  if (env("SLURM_PROCID") && env("SLURM_NTASKS")) return Launcher::kSrun;
  return Launcher::kNone;
}

}  // namespace

std::optional<std::string> launcher_rank_text() {
  switch (detect_launcher()) {
    case Launcher::kZcx: return params::rank.raw();
    case Launcher::kTorchrun: return env("RANK");
    case Launcher::kMpirun: return env("OMPI_COMM_WORLD_RANK");
    case Launcher::kSrun: return env("SLURM_PROCID");
    case Launcher::kNone: break;
  }
  return std::nullopt;
}

Status launch_info_from_env(LaunchInfo* out) {
  ZCX_CHECK_ARG(out != nullptr, kLogBootstrap, "launch info output is NULL");
  LaunchInfo info;
  const Launcher launcher = detect_launcher();
  if (launcher == Launcher::kZcx)
    ZCX_TRY(from_zcx(&info));
  else if (launcher == Launcher::kTorchrun)
    ZCX_TRY(from_torchrun(&info));
  else if (launcher == Launcher::kMpirun)
    ZCX_TRY(from_mpirun(&info));
  else if (launcher == Launcher::kSrun)
    ZCX_TRY(from_srun(&info));
  else
    return set_error(Status::kInvalidArg, kLogBootstrap,
                     "no launcher environment: set ZCX_RANK, ZCX_NRANKS, ZCX_ROOT and "
                     "ZCX_SECRET (zcx-run does), or run under mpirun, srun or torchrun");
  if (info.rank >= info.nranks)
    return set_error(Status::kInvalidArg, kLogBootstrap, "rank %d is out of range: %d ranks (from %s)",
                     info.rank, info.nranks, info.source.c_str());
  ZCX_TRY(secret_from_env(&info));
  *out = info;
  return Status::kSuccess;
}

}  // namespace zcx
