// SPDX-License-Identifier: Apache-2.0
//
// troupe_cluster's child processes: starting one with its output in a log file, reaping, killing
// one, and stopping them all within a bound.
//
// No child outlives the launcher: each gets SIGTERM when the launcher dies (PR_SET_PDEATHSIG).
// The launcher blocks SIGINT, SIGTERM and SIGCHLD and waits for them with WaitSignal; children
// get the mask they should run with (`child_mask`) back before exec.
//
// Thread-safety: thread-compatible; troupe_cluster has one thread.
//
// Example:
//
//   Child node{.name = "node 1", .log = dir + "/node-1.log", .args = {binary, "--node_id=1"}};
//   if (!Spawn({.log_stdout = true, .own_group = true}, original_mask, &node)) { ... }
//   ...
//   StopAll(children, blocked);
#pragma once

#include <sys/types.h>

#include <csignal>
#include <cstddef>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace troupe::examples {

struct Child {
  std::string name;
  std::string log;
  // The command line; args[0] is the binary's path.
  std::vector<std::string> args;
  pid_t pid = -1;
  bool running = false;
  // The wait status, once reaped.
  int status = 0;
};

struct SpawnOptions {
  // Also stdout to the log (else the child writes to ours).
  bool log_stdout = false;
  // A new process group with stdin from /dev/null: out of reach of the terminal's Ctrl-C.
  bool own_group = false;
  // Append to the log (a restart keeps what the last process wrote) instead of truncating it.
  bool append = false;
};

// Returns strerror's text for `error` (thread-safe).
std::string ErrorText(int error);
// Returns "SIGKILL" or "signal N".
std::string SignalText(int signal);
// Returns "exit status N", "killed by SIGX" or "wait status N".
std::string Describe(int status);
// Prints the last `lines` lines of `path` to stdout.
void PrintTail(const std::string& path, size_t lines = 15);

// Starts `child->args` with stderr appended to `child->log`; sets pid and running. Returns false
// (and says why on stdout) when the log cannot be opened or fork fails; an exec that fails is
// the child's exit status 127.
bool Spawn(const SpawnOptions& options, const sigset_t& child_mask, Child* child);

// Reaps every child that has ended; returns true when one did.
bool Reap(std::vector<Child>& children);

// Sends SIGKILL to a running child and reaps it.
void KillNow(Child* child);

// Waits up to `timeout` for a signal of `set` (all blocked); returns it, or 0.
int WaitSignal(const sigset_t& set, absl::Duration timeout);

// Sends SIGTERM to every running child and SIGKILL to those still running 5 s later; reaps all.
void StopAll(std::vector<Child>& children, const sigset_t& set);

}  // namespace troupe::examples
