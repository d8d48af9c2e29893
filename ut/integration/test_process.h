// SPDX-License-Identifier: Apache-2.0
//
// TestProcess: one server program a test starts (etcd, Prometheus), its output in a log file,
// killed with the test process (PR_SET_PDEATHSIG) if the test dies first. Only the process it
// started is ever signalled (by its pid), and every wait is bounded.
//
// Thread-safety: thread-compatible (the test's thread).
//
// Example:
//
//   TestProcess prometheus;
//   prometheus.Launch({"/usr/bin/prometheus", "--config.file=" + config}, dir + "/log");
//   ...
//   prometheus.Stop();  // or let the destructor do it
#pragma once

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace troupe::testutil {

class TestProcess {
 public:
  TestProcess() = default;
  ~TestProcess() { Stop(); }
  TestProcess(const TestProcess&) = delete;
  TestProcess& operator=(const TestProcess&) = delete;
  TestProcess(TestProcess&&) = delete;
  TestProcess& operator=(TestProcess&&) = delete;

  // Starts `args` (args[0] is the program's path) with stdout and stderr appended to `log`, and
  // returns at once.
  void Launch(std::vector<std::string> args, std::string log) {
    log_ = std::move(log);
    std::vector<char*> argv;
    for (std::string& arg : args) {
      argv.push_back(arg.data());
    }
    argv.push_back(nullptr);
    // Between fork and exec a child of a threaded process makes only async-signal-safe calls.
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        ::dup2(fd, STDOUT_FILENO);
        ::dup2(fd, STDERR_FILENO);
      }
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }

  // Ends the process (SIGTERM, then SIGKILL after 5 s) and reaps it.
  void Stop() { End(SIGTERM); }
  // Kills the process at once (SIGKILL), as a crash or a lost machine would, and reaps it.
  void Kill() { End(SIGKILL); }

  pid_t pid() const { return pid_; }

  // The last `bytes` of the log, for a failure message.
  std::string LogTail(size_t bytes = 4000) const {
    std::ifstream in(log_);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text.substr(text.size() > bytes ? text.size() - bytes : 0);
  }

 private:
  void End(int signal) {
    if (pid_ <= 0) {
      return;
    }
    ::kill(pid_, signal);
    int status = 0;
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (absl::Now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    pid_ = -1;
  }

  std::string log_;
  pid_t pid_ = -1;
};

}  // namespace troupe::testutil
