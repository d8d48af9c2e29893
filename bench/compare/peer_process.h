// SPDX-License-Identifier: Apache-2.0
//
// The second process of a remote comparison program (caf_compare, grpc_compare, zmq_compare,
// troupe_remote): the client starts its own binary again as the server, reads the one line the
// server prints once it listens (its port, or "ready"), runs the workload, and ends the server by
// its PID. Nothing else is started or ended.
//
// Thread-safety: thread-compatible (one client thread starts and stops its one server).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace compare {

class ServerProcess {
 public:
  // Starts `/proc/self/exe args...` with its stdout on a pipe and waits (at most `timeout`) for
  // its first line, left in line(). ok() is false, with the reason in error(), when the server
  // could not start, ended or printed nothing in time.
  explicit ServerProcess(const std::vector<std::string>& args,
                         std::chrono::seconds timeout = std::chrono::seconds(30)) {
    int fds[2];
    if (pipe(fds) != 0) {
      error_ = "pipe failed";
      return;
    }
    std::vector<char*> argv;
    std::string self = "/proc/self/exe";
    argv.push_back(self.data());
    std::vector<std::string> copies = args;
    for (std::string& arg : copies) {
      argv.push_back(arg.data());
    }
    argv.push_back(nullptr);
    pid_ = fork();
    if (pid_ < 0) {
      error_ = "fork failed";
      return;
    }
    if (pid_ == 0) {
      // The server goes with its client, however the client ends (the run's timeout included).
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    read_fd_ = fds[0];
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char c = 0;
    // Bounded by the deadline: the pipe is polled without blocking.
    fcntl(read_fd_, F_SETFL, fcntl(read_fd_, F_GETFL) | O_NONBLOCK);
    while (std::chrono::steady_clock::now() < deadline) {
      const ssize_t got = read(read_fd_, &c, 1);
      if (got == 1) {
        if (c == '\n') {
          ok_ = true;
          return;
        }
        line_ += c;
      } else if (got == 0) {
        error_ = "the server ended before it was ready";
        return;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    error_ = "the server was not ready within the timeout";
  }

  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Ends the server: SIGTERM, then SIGKILL after 5 s.
  ~ServerProcess() { Stop(); }

  bool ok() const { return ok_; }
  const std::string& line() const { return line_; }
  const std::string& error() const { return error_; }

  // Ends the server (once): SIGTERM, waits up to 5 s for it to exit, then SIGKILL.
  void Stop() {
    if (pid_ <= 0) {
      return;
    }
    kill(pid_, SIGTERM);
    for (int i = 0; i < 500; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = 0;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = 0;
    }
    if (read_fd_ >= 0) {
      close(read_fd_);
      read_fd_ = -1;
    }
  }

 private:
  pid_t pid_ = 0;
  int read_fd_ = -1;
  bool ok_ = false;
  std::string line_;
  std::string error_;
};

// Prints the server's ready line (its port, or "ready") for the client, unbuffered.
inline void AnnounceReady(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace compare
