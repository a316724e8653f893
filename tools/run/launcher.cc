#include "launcher.h"

#include "common/clock.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace zcx::run {
namespace {

constexpr int64_t kNsPerSec = 1000000000;
constexpr int64_t kAfterKillNs = 5 * kNsPerSec;  // how long SIGKILLed ranks get to vanish
constexpr int64_t kDrainNs = 2 * kNsPerSec;      // output left in pipes after the last exit

void say(const std::string& message) {
  std::string line = "zcx-run: " + message + "\n";
  write_all(STDERR_FILENO, line.data(), line.size());
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

int64_t seconds_to_ns(double s) { return static_cast<int64_t>(s * 1e9); }

std::string format_seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", s);
  return text;
}

// Pipe whose read end (ours) is non-blocking and both ends close-on-exec.
bool make_pipe(UniqueFd* read_end, UniqueFd* write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  read_end->reset(fds[0]);
  write_end->reset(fds[1]);
  return ::fcntl(fds[0], F_SETFL, O_NONBLOCK) == 0;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// In the child between fork and exec: only async-signal-safe calls, then _exit.
[[noreturn]] void exec_rank(char** argv, char** envp, int out, int err, int in,
                            const sigset_t& mask, pid_t launcher, const cpu_set_t* cpus) {
  ::setpgid(0, 0);
  if (cpus != nullptr) (void)::sched_setaffinity(0, sizeof *cpus, cpus);  // best effort
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // rank dies if zcx-run is killed outright
  if (::getppid() != launcher) _exit(127);
  if (::dup2(in, STDIN_FILENO) < 0 || ::dup2(out, STDOUT_FILENO) < 0 ||
      ::dup2(err, STDERR_FILENO) < 0)
    _exit(127);
  // Dispositions we may have inherited as "ignored" (a background job ignores SIGINT) would
  // pass through exec and make the rank deaf to the signals we forward.
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGCHLD}) ::signal(sig, SIG_DFL);
  ::sigprocmask(SIG_SETMASK, &mask, nullptr);
  ::execvpe(argv[0], argv, envp);
  int code = errno == ENOENT ? 127 : 126;
  const char* why = strerror(errno);
  char msg[512];
  int n = std::snprintf(msg, sizeof msg, "zcx-run: cannot execute '%s': %s\n", argv[0], why);
  if (n > 0) write_all(STDERR_FILENO, msg, static_cast<size_t>(n) < sizeof msg ? n : sizeof msg - 1);
  _exit(code);
}

}  // namespace

int Launcher::run() {
  if (!setup()) return 1;
  JobEnv job;
  std::string error;
  if (!make_job_env(&job, &error)) {
    say(error);
    return 1;
  }
  ranks_.resize(static_cast<size_t>(options_.nranks));
  plan_binding();
  if (options_.timeout_s > 0) job_deadline_ns_ = now_ns() + seconds_to_ns(options_.timeout_s);
  for (int r = 0; r < options_.nranks && phase_ == Phase::kRunning; ++r)
    if (!spawn(r, job)) fail(1, "cannot start rank " + std::to_string(r) + ": " + strerror(errno));
  event_loop();
  for (Rank& rank : ranks_) {
    rank.out.close();
    rank.err.close();
  }
  return exit_code_;
}

bool Launcher::setup() {
  sigset_t block;
  sigemptyset(&block);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&block, sig);
  ::signal(SIGPIPE, SIG_IGN);  // our stdout may go away; the ranks get SIG_DFL back
  if (::sigprocmask(SIG_BLOCK, &block, &child_mask_) != 0) return false;
  signal_fd_.reset(::signalfd(-1, &block, SFD_NONBLOCK | SFD_CLOEXEC));
  dev_null_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  // Orphaned grandchildren are re-parented to us, so we reap them too: no zombies.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  if (signal_fd_.valid() && dev_null_.valid()) return true;
  say(std::string("cannot set up signal handling: ") + strerror(errno));
  return false;
}

// Rank r gets the r-th CPU of zcx-run's own affinity set (a job started under taskset or a
// cgroup stays inside it). Unbound ranks spinning on shared memory let the scheduler move
// them: on a 2-CPU VM that made an unbound cache-line ping-pong 4x slower than a bound one.
void Launcher::plan_binding() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (options_.bind == Bind::kNone || ::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  const bool fits = static_cast<int>(cpus.size()) >= options_.nranks;
  if (cpus.empty() || (options_.bind == Bind::kAuto && !fits)) return;
  cpu_of_rank_.resize(static_cast<size_t>(options_.nranks));
  for (int r = 0; r < options_.nranks; ++r) {
    CPU_ZERO(&cpu_of_rank_[r]);
    CPU_SET(cpus[static_cast<size_t>(r) % cpus.size()], &cpu_of_rank_[r]);
  }
}

bool Launcher::spawn(int r, const JobEnv& job) {
  UniqueFd out_read, out_write, err_read, err_write;
  if (!make_pipe(&out_read, &out_write) || !make_pipe(&err_read, &err_write)) return false;
  std::vector<std::string> env = rank_environment(job, r, options_.nranks, options_.env);
  std::vector<std::string> args = options_.command;
  std::vector<char*> envp = c_strings(env), argv = c_strings(args);
  pid_t launcher = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0)
    exec_rank(argv.data(), envp.data(), out_write.get(), err_write.get(), dev_null_.get(),
              child_mask_, launcher, cpu_of_rank_.empty() ? nullptr : &cpu_of_rank_[r]);
  ::setpgid(pid, pid);  // also in the child: whichever runs first, the group exists now
  Rank& rank = ranks_[static_cast<size_t>(r)];
  rank.pid = pid;
  rank.running = true;
  rank.out = PrefixedStream(r, std::move(out_read), STDOUT_FILENO);
  rank.err = PrefixedStream(r, std::move(err_read), STDERR_FILENO);
  return true;
}

void Launcher::event_loop() {
  while (!finished()) {
    poll_once();
    check_deadlines();
  }
}

// Done when every rank has exited and its output is drained (or the drain bound passed),
// or when ranks ignore SIGKILL past its bound.
bool Launcher::finished() {
  if (any_running()) {
    if (phase_ != Phase::kKilling || now_ns() < phase_deadline_ns_) return false;
    say("ranks " + running_ranks() + " did not exit after SIGKILL; giving up on them");
    return true;
  }
  if (drain_deadline_ns_ == 0) {
    drain_deadline_ns_ = now_ns() + kDrainNs;
    // A stopped job leaves nothing behind: kill what its ranks started in their groups.
    if (phase_ != Phase::kRunning) signal_groups(SIGKILL);
  }
  bool open = false;
  for (const Rank& rank : ranks_) open = open || rank.out.open() || rank.err.open();
  return !open || now_ns() >= drain_deadline_ns_;
}

int Launcher::poll_timeout_ms() const {
  int64_t next = INT64_MAX;
  if (phase_ == Phase::kRunning && job_deadline_ns_ != 0) next = job_deadline_ns_;
  if (phase_ != Phase::kRunning) next = std::min(next, phase_deadline_ns_);
  if (drain_deadline_ns_ != 0) next = std::min(next, drain_deadline_ns_);
  if (next == INT64_MAX) return -1;
  int64_t left_ms = (next - now_ns() + 999999) / 1000000;
  return static_cast<int>(std::clamp<int64_t>(left_ms, 0, 60000));
}

void Launcher::poll_once() {
  std::vector<pollfd> fds{{signal_fd_.get(), POLLIN, 0}};
  std::vector<PrefixedStream*> streams{nullptr};
  for (Rank& rank : ranks_)
    for (PrefixedStream* s : {&rank.out, &rank.err})
      if (s->open()) {
        fds.push_back({s->fd(), POLLIN, 0});
        streams.push_back(s);
      }
  int n = ::poll(fds.data(), fds.size(), poll_timeout_ms());
  if (n <= 0) return;  // timeout, or EINTR: the caller checks deadlines and loops
  for (size_t i = 1; i < fds.size(); ++i)
    if (fds[i].revents != 0) streams[i]->pump();
  if (fds[0].revents != 0) read_signals();
}

void Launcher::check_deadlines() {
  int64_t now = now_ns();
  if (phase_ == Phase::kRunning && job_deadline_ns_ != 0 && now >= job_deadline_ns_ &&
      any_running()) {
    fail(124, "timeout after " + format_seconds(options_.timeout_s) + " s: ranks " +
                  running_ranks() + " still running");
  } else if (phase_ == Phase::kStopping && now >= phase_deadline_ns_ && any_running()) {
    say("ranks " + running_ranks() + " still running " + format_seconds(options_.grace_s) +
        " s after " + signal_name(stop_signal_) + "; sending SIGKILL");
    stop(SIGKILL);
  }
}

void Launcher::read_signals() {
  signalfd_siginfo info;
  while (::read(signal_fd_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) continue;  // reaped below, whatever the count of coalesced signals
    if (phase_ == Phase::kRunning) {
      if (!failed_) exit_code_ = 128 + sig;
      failed_ = true;
      say("received " + signal_name(sig) + "; forwarding it to the ranks");
      stop(sig);
    } else {
      say("received " + signal_name(sig) + " again; killing the ranks");
      stop(SIGKILL);
    }
  }
  reap_children();
}

void Launcher::reap_children() {
  int wstatus = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &wstatus, WNOHANG)) > 0) {
    for (size_t r = 0; r < ranks_.size(); ++r)
      if (ranks_[r].pid == pid && ranks_[r].running) on_rank_exit(static_cast<int>(r), wstatus);
  }
}

void Launcher::on_rank_exit(int r, int wstatus) {
  Rank& rank = ranks_[static_cast<size_t>(r)];
  rank.running = false;
  rank.out.pump();  // its last words come before our verdict
  rank.err.pump();
  if (phase_ != Phase::kRunning) return;  // stopped by us: not a failure of its own
  std::string who = "rank " + std::to_string(r);
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0) {
    fail(WEXITSTATUS(wstatus), who + " exited with code " + std::to_string(WEXITSTATUS(wstatus)));
  } else if (WIFSIGNALED(wstatus)) {
    int sig = WTERMSIG(wstatus);
    fail(128 + sig, who + " killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")");
  }
}

// Records the first failure and stops every rank still running.
void Launcher::fail(int code, const std::string& message) {
  say(message);
  if (!failed_) exit_code_ = code;
  failed_ = true;
  if (phase_ == Phase::kRunning) stop(SIGTERM);
}

void Launcher::stop(int sig) {
  if (sig != SIGKILL && any_running())
    say("stopping ranks " + running_ranks() + " (" + signal_name(sig) + ")");
  signal_groups(sig);
  stop_signal_ = sig;
  phase_ = sig == SIGKILL ? Phase::kKilling : Phase::kStopping;
  phase_deadline_ns_ = now_ns() + (sig == SIGKILL ? kAfterKillNs : seconds_to_ns(options_.grace_s));
}

// Signals each rank's process group, including groups whose leader has exited: helpers a
// rank left behind must not outlive the job. A group id cannot be reused while the group
// has members.
void Launcher::signal_groups(int sig) {
  for (const Rank& rank : ranks_)
    if (rank.pid > 0) ::kill(-rank.pid, sig);
}

std::string Launcher::running_ranks() const {
  std::string list;
  for (size_t r = 0; r < ranks_.size(); ++r)
    if (ranks_[r].running) list += (list.empty() ? "" : ",") + std::to_string(r);
  return list;
}

bool Launcher::any_running() const {
  for (const Rank& rank : ranks_)
    if (rank.running) return true;
  return false;
}

}  // namespace zcx::run
