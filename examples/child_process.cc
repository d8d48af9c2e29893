// SPDX-License-Identifier: Apache-2.0
#include "child_process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace troupe::examples {

namespace {

constexpr absl::Duration kStopGrace = absl::Seconds(5);

}  // namespace

// strerror and strsignal are not thread-safe (this program has one thread, but say so anyway).
std::string ErrorText(int error) {
  std::array<char, 256> buffer{};
  return strerror_r(error, buffer.data(), buffer.size());  // the GNU strerror_r
}

std::string SignalText(int signal) {
  const char* name = sigabbrev_np(signal);
  return name != nullptr ? absl::StrCat("SIG", name) : absl::StrCat("signal ", signal);
}

std::string Describe(int status) {
  if (WIFEXITED(status)) {
    return absl::StrCat("exit status ", WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return absl::StrCat("killed by ", SignalText(WTERMSIG(status)));
  }
  return absl::StrCat("wait status ", status);
}

void PrintTail(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::deque<std::string> tail;
  for (std::string line; std::getline(in, line);) {
    tail.push_back(std::move(line));
    if (tail.size() > lines) {
      tail.pop_front();
    }
  }
  std::printf("---- last %zu line(s) of %s\n", tail.size(), path.c_str());
  for (const std::string& line : tail) {
    std::printf("  | %s\n", line.c_str());
  }
  std::printf("----\n");
}

bool Spawn(const SpawnOptions& options, const sigset_t& child_mask, Child* child) {
  const int log =
      ::open(child->log.c_str(),
             O_WRONLY | O_CREAT | O_CLOEXEC | (options.append ? O_APPEND : O_TRUNC), 0644);
  if (log < 0) {
    std::printf("troupe_cluster: %s: %s\n", child->log.c_str(), ErrorText(errno).c_str());
    return false;
  }
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  std::vector<char*> argv;
  argv.reserve(child->args.size() + 1);
  for (const std::string& arg : child->args) {
    argv.push_back(const_cast<char*>(arg.c_str()));
  }
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) {
      ::_exit(1);  // the launcher died before prctl took effect
    }
    if (options.own_group) {
      ::setpgid(0, 0);
      if (null >= 0) {
        ::dup2(null, STDIN_FILENO);
      }
    }
    ::dup2(log, STDERR_FILENO);
    if (options.log_stdout) {
      ::dup2(log, STDOUT_FILENO);
    }
    ::pthread_sigmask(SIG_SETMASK, &child_mask, nullptr);
    ::execv(argv[0], argv.data());
    constexpr std::string_view kExecFailed = "troupe_cluster: exec failed\n";
    (void)!::write(STDERR_FILENO, kExecFailed.data(), kExecFailed.size());
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(log);
  if (null >= 0) {
    ::close(null);
  }
  if (pid < 0) {
    std::printf("troupe_cluster: fork: %s\n", ErrorText(fork_errno).c_str());
    return false;
  }
  if (options.own_group) {
    ::setpgid(pid, pid);  // also here: no window in which a terminal signal reaches it
  }
  child->pid = pid;
  child->running = true;
  return true;
}

bool Reap(std::vector<Child>& children) {
  bool any = false;
  for (Child& child : children) {
    if (child.running && ::waitpid(child.pid, &child.status, WNOHANG) == child.pid) {
      child.running = false;
      any = true;
    }
  }
  return any;
}

void KillNow(Child* child) {
  if (!child->running) {
    return;
  }
  ::kill(child->pid, SIGKILL);
  // SIGKILL cannot be caught: the wait ends as soon as the kernel has torn the process down.
  ::waitpid(child->pid, &child->status, 0);
  child->running = false;
}

int WaitSignal(const sigset_t& set, absl::Duration timeout) {
  const timespec wait = absl::ToTimespec(std::max(timeout, absl::ZeroDuration()));
  const int signal = ::sigtimedwait(&set, nullptr, &wait);
  return signal > 0 ? signal : 0;
}

void StopAll(std::vector<Child>& children, const sigset_t& set) {
  for (Child& child : children) {
    if (child.running) {
      ::kill(child.pid, SIGTERM);
    }
  }
  const absl::Time deadline = absl::Now() + kStopGrace;
  while (absl::Now() < deadline) {
    Reap(children);
    bool running = false;
    for (const Child& child : children) {
      running = running || child.running;
    }
    if (!running) {
      return;
    }
    (void)WaitSignal(set, absl::Milliseconds(20));
  }
  for (Child& child : children) {
    if (child.running) {
      std::printf("troupe_cluster: %s (pid %d) ignored SIGTERM for %s: SIGKILL\n",
                  child.name.c_str(), child.pid, absl::FormatDuration(kStopGrace).c_str());
      KillNow(&child);
    }
  }
}

}  // namespace troupe::examples
