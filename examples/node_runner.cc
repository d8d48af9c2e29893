// SPDX-License-Identifier: Apache-2.0
#include "node_runner.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

#include "actors/config.h"
#include "actors/log.h"
#include "node/config.h"

namespace troupe::examples {

namespace {

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

void BlockTerminationSignals() {
  sigset_t set = TerminationSignals();
  // Signals whose default action would end the process although a node has no use for them:
  // blocked too, they stay pending and end nothing.
  for (const int ignored : {SIGHUP, SIGUSR1, SIGUSR2}) {
    sigaddset(&set, ignored);
  }
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForTerminationSignal(absl::Duration timeout) {
  const sigset_t set = TerminationSignals();
  const timespec wait = absl::ToTimespec(std::max(timeout, absl::ZeroDuration()));
  while (true) {
    const int signal = sigtimedwait(&set, nullptr, &wait);
    if (signal > 0) {
      return signal;
    }
    if (errno != EINTR) {
      return 0;  // EAGAIN: the timeout passed
    }
  }
}

std::string SignalName(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    default:
      return absl::StrCat("signal ", signal);
  }
}

absl::StatusOr<interconnect::ProtocolRange> ParseTestingProtocol(absl::string_view versions,
                                                                 absl::string_view features) {
  interconnect::ProtocolRange range;
  if (!versions.empty()) {
    const std::vector<absl::string_view> ends = absl::StrSplit(versions, "..");
    if (ends.size() > 2 || !absl::SimpleAtoi(ends.front(), &range.oldest) ||
        !absl::SimpleAtoi(ends.back(), &range.newest) || range.oldest == 0 ||
        range.oldest > range.newest) {
      return absl::InvalidArgumentError(
          absl::StrCat("--testing_protocol: expected a version N or a range OLDEST..NEWEST from 1, "
                       "got \"",
                       versions, "\""));
    }
  }
  if (features == "none") {
    range.features.clear();
  } else if (features != "build") {
    range.features.clear();
    for (absl::string_view feature : absl::StrSplit(features, ',')) {
      if (feature.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--testing_features: an empty name in \"", features, "\""));
      }
      range.features.emplace_back(feature);
    }
  }
  return range;
}

absl::StatusOr<proto::ActorSystemConfig> LoadNodeConfig(const std::string& path, uint32_t node_id,
                                                        const AddressFlags& addresses) {
  if (path.empty()) {
    return absl::InvalidArgumentError(
        "--config: required (a protobuf text file with the node table)");
  }
  // The actor system's sections only: the flags may complete the others before they are checked.
  absl::StatusOr<proto::ActorSystemConfig> config = troupe::LoadConfigFile(path);
  if (!config.ok()) {
    return config.status();  // names the file and the field, or the line and column
  }
  std::string flags;
  if (node_id != 0) {
    config->set_node_id(node_id);
    absl::StrAppend(&flags, " --node_id=", node_id);
  }
  proto::InterconnectConfig& ic = *config->mutable_interconnect();
  if (!addresses.listen_host.empty()) {
    ic.mutable_listen()->set_host(addresses.listen_host);
    absl::StrAppend(&flags, " --listen_host=", addresses.listen_host);
  }
  if (!addresses.advertise_host.empty()) {
    ic.mutable_advertise()->set_host(addresses.advertise_host);
    absl::StrAppend(&flags, " --advertise_host=", addresses.advertise_host);
  }
  if (addresses.advertise_port != 0) {
    ic.mutable_advertise()->set_port(addresses.advertise_port);
    absl::StrAppend(&flags, " --advertise_port=", addresses.advertise_port);
  }
  if (absl::Status status = node::ValidateConfig(*config); !status.ok()) {
    return absl::Status(status.code(),
                        flags.empty() ? absl::StrCat(path, ": ", status.message())
                                      : absl::StrCat(path, " with", flags, ": ", status.message()));
  }
  if (config->interconnect().has_etcd()) {
    return config;  // the id is node_id, or etcd's choice
  }
  const uint32_t self = config->has_node_id() ? config->node_id() : 1;
  for (const proto::NodeAddress& node : config->interconnect().nodes()) {
    if (node.node_id() == self) {
      return config;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": interconnect.nodes: no entry for node_id ", self, " (set node_id or --node_id)"));
}

absl::Status WriteNodeIdFile(const std::string& path, NodeId node, const std::string& metrics_url) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << node << "\n" << metrics_url << "\n";
    if (!out.flush()) {
      return absl::InternalError(absl::StrCat("cannot write ", temporary));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", temporary, " to ", path));
  }
  return absl::OkStatus();
}

NodeId ReadNodeIdFile(const std::string& path, std::string* metrics_url) {
  std::ifstream in(path);
  std::string line;
  NodeId node = 0;
  if (!std::getline(in, line) || !absl::SimpleAtoi(line, &node)) {
    return 0;
  }
  if (metrics_url != nullptr && std::getline(in, line)) {
    *metrics_url = line;
  }
  return node;
}

void EnableSessionLogs() {
  if (!LogEnabled(LogLevel::kInfo, LogComponent::kInterconnect)) {
    SetLogLevel(LogLevel::kInfo, LogComponent::kInterconnect);
  }
  if (!LogEnabled(LogLevel::kInfo, LogComponent::kUser)) {
    SetLogLevel(LogLevel::kInfo, LogComponent::kUser);
  }
}

void SessionWatcher::Poll(std::FILE* out) {
  std::vector<interconnect::SessionCounters> now = ic_->Counters();
  for (const interconnect::SessionCounters& peer : now) {
    bool was_up = false;
    for (const interconnect::SessionCounters& before : last_) {
      if (before.peer == peer.peer) {
        was_up = before.up;
      }
    }
    if (peer.up != was_up) {
      std::fprintf(out, "node %u: session with node %u %s (sessions %llu, connections %llu)\n",
                   self_, peer.peer, peer.up ? "up" : "down",
                   static_cast<unsigned long long>(peer.sessions),
                   static_cast<unsigned long long>(peer.connections));
    }
  }
  std::fflush(out);
  last_ = std::move(now);
}

void SessionWatcher::PrintCounters(std::FILE* out) const {
  for (const interconnect::SessionCounters& peer : ic_->Counters()) {
    auto u = [](uint64_t value) { return static_cast<unsigned long long>(value); };
    std::fprintf(out,
                 "node %u: peer %u: sessions %llu, connections %llu, events sent %llu / received "
                 "%llu, bytes written %llu / read %llu, frames resent %llu, duplicates dropped "
                 "%llu, backpressure stalls %llu, protocol errors %llu\n",
                 self_, peer.peer, u(peer.sessions), u(peer.connections), u(peer.events_sent),
                 u(peer.events_received), u(peer.bytes_written), u(peer.bytes_read),
                 u(peer.frames_resent), u(peer.duplicates_dropped), u(peer.backpressure_stalls),
                 u(peer.protocol_errors));
  }
  std::fflush(out);
}

}  // namespace troupe::examples
