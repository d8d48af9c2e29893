// SPDX-License-Identifier: Apache-2.0
//
// troupe_cluster's etcd (--membership=etcd): etcd as a child process on two free loopback ports,
// its data in a directory of the workdir that is removed when it stops.
//
// Thread-safety: thread-compatible; troupe_cluster has one thread.
//
// Example:
//
//   LocalEtcd etcd;
//   if (std::string problem = etcd.Start("/usr/bin/etcd", workdir, blocked, original_mask);
//       !problem.empty()) { ... }
//   config.mutable_interconnect()->mutable_etcd()->set_endpoint(etcd.endpoint());
//   ...
//   etcd.Stop();  // or the destructor
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

#include "child_process.h"

namespace troupe::examples {

class LocalEtcd {
 public:
  LocalEtcd() = default;
  LocalEtcd(const LocalEtcd&) = delete;
  LocalEtcd& operator=(const LocalEtcd&) = delete;
  LocalEtcd(LocalEtcd&&) = delete;
  LocalEtcd& operator=(LocalEtcd&&) = delete;
  ~LocalEtcd() { Stop(); }

  // Starts `binary` on two free loopback ports with its data in `workdir`/etcd-data (emptied
  // first) and its log in `workdir`/etcd.log; waits up to kReadyTimeout until it serves clients.
  // `signals` are the launcher's blocked signals (SIGINT or SIGTERM interrupts the wait),
  // `child_mask` the mask etcd runs with. Returns why it is not serving, or "".
  std::string Start(const std::string& binary, const std::string& workdir, const sigset_t& signals,
                    const sigset_t& child_mask);

  // "http://127.0.0.1:<client port>".
  std::string endpoint() const;
  pid_t pid() const { return child_.empty() ? -1 : child_[0].pid; }
  const std::string& data() const { return data_; }
  // Whether it is still running (reaps it when not).
  bool running();

  // Stops it (SIGTERM, SIGKILL after 5 s) and removes its data. Idempotent.
  void Stop();

 private:
  static constexpr absl::Duration kReadyTimeout = absl::Seconds(20);

  // Whether it answers a range request with 200 (it serves clients).
  bool Serving() const;

  std::vector<Child> child_;  // empty, or etcd
  uint16_t client_port_ = 0;
  std::string data_;
  sigset_t signals_{};
};

}  // namespace troupe::examples
