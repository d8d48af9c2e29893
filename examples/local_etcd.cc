// SPDX-License-Identifier: Apache-2.0
#include "local_etcd.h"

#include <httplib.h>

#include <filesystem>
#include <system_error>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

#include "interconnect/testing/free_ports.h"

namespace troupe::examples {

std::string LocalEtcd::Start(const std::string& binary, const std::string& workdir,
                             const sigset_t& signals, const sigset_t& child_mask) {
  absl::StatusOr<std::vector<uint16_t>> ports = troupe::interconnect::FreeLoopbackPorts(2);
  if (!ports.ok()) {
    return absl::StrCat("cannot pick free ports: ", ports.status().message());
  }
  client_port_ = (*ports)[0];
  signals_ = signals;
  data_ = workdir + "/etcd-data";
  std::error_code error;
  std::filesystem::remove_all(data_, error);  // a workdir used before has the last run's
  const std::string client = endpoint();
  const std::string peer = absl::StrCat("http://127.0.0.1:", (*ports)[1]);
  child_ = {{.name = "etcd",
             .log = workdir + "/etcd.log",
             .args = {binary, "--name", "troupe", "--data-dir", data_, "--listen-client-urls",
                      client, "--advertise-client-urls", client, "--listen-peer-urls", peer,
                      "--initial-advertise-peer-urls", peer, "--initial-cluster", "troupe=" + peer,
                      "--logger=zap", "--log-level=error"}}};
  if (!Spawn({.log_stdout = true, .own_group = true}, child_mask, &child_[0])) {
    return "cannot start it";
  }
  const absl::Time deadline = absl::Now() + kReadyTimeout;
  while (!Serving()) {
    const int signal = WaitSignal(signals, absl::Milliseconds(50));
    if (signal == SIGINT || signal == SIGTERM) {
      return absl::StrCat("interrupted (", SignalText(signal), ")");
    }
    Reap(child_);
    if (!child_[0].running) {
      PrintTail(child_[0].log);
      return absl::StrCat("it ended: ", Describe(child_[0].status));
    }
    if (absl::Now() > deadline) {
      PrintTail(child_[0].log);
      return absl::StrCat("it did not serve clients within ", absl::FormatDuration(kReadyTimeout));
    }
  }
  return "";
}

std::string LocalEtcd::endpoint() const { return absl::StrCat("http://127.0.0.1:", client_port_); }

bool LocalEtcd::running() {
  Reap(child_);
  return !child_.empty() && child_[0].running;
}

void LocalEtcd::Stop() {
  if (!child_.empty()) {
    StopAll(child_, signals_);
    child_.clear();
  }
  if (!data_.empty()) {
    std::error_code error;
    std::filesystem::remove_all(data_, error);
    data_.clear();
  }
}

bool LocalEtcd::Serving() const {
  httplib::Client client(endpoint());
  client.set_connection_timeout(0, 500'000);
  client.set_read_timeout(0, 500'000);
  // The key "\0" (base64 "AA=="): any range answer will do.
  const httplib::Result result =
      client.Post("/v3/kv/range", R"({"key":"AA=="})", "application/json");
  return result && result->status == 200;
}

}  // namespace troupe::examples
