// SPDX-License-Identifier: Apache-2.0
//
// What troupe_node and troupe_loadgen share to run one node of a cluster from a config file:
// loading the config with a node id override, termination signals, a watcher that prints
// sessions coming up and going down, and the id file through which a node whose id etcd chose
// tells troupe_cluster that id.
//
// Signals: BlockTerminationSignals() must run first in main, before any thread exists, so every
// thread (executor pools, scheduler, the TCP transport's I/O thread) inherits the blocked mask and
// SIGINT/SIGTERM wait for WaitForTerminationSignal() on the main thread instead of killing the
// process mid-handler. Then the main thread stops the node with troupe::node::Node::Shutdown, which
// leaves the cluster (interconnect.h, "Leaving") before it stops the ActorSystem. SIGHUP, SIGUSR1
// and SIGUSR2 are blocked as well and do nothing: only SIGINT and SIGTERM (and SIGKILL) end a
// node.
//
// Thread-safety: call everything from the main thread.
//
// Example:
//
//   troupe::examples::BlockTerminationSignals();
//   auto config = troupe::examples::LoadNodeConfig(path, node_id);
//   ...
//   while (troupe::examples::WaitForTerminationSignal(absl::Milliseconds(200)) == 0) {
//     watcher.Poll(stdout);
//   }
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

#include "actors/actor_system.h"
#include "interconnect/interconnect.h"
#include "interconnect/protocol.h"
#include "proto/config.pb.h"

namespace troupe::examples {

// Blocks SIGINT and SIGTERM in the calling thread (and in every thread it starts later).
void BlockTerminationSignals();

// Waits up to `timeout` for SIGINT or SIGTERM (blocked by BlockTerminationSignals); returns the
// signal's number, or 0 when none came.
int WaitForTerminationSignal(absl::Duration timeout);

// Returns "SIGINT", "SIGTERM" or "signal N".
std::string SignalName(int signal);

// Where a node listens and is dialled, from command-line flags, over the config's
// interconnect.listen and interconnect.advertise. Empty or 0: the config's.
struct AddressFlags {
  std::string listen_host;      // --listen_host: interconnect.listen.host
  std::string advertise_host;   // --advertise_host: interconnect.advertise.host
  uint32_t advertise_port = 0;  // --advertise_port: interconnect.advertise.port
};

// Loads the config at `path`, makes `node_id` (when not 0) the node's id and puts `addresses` in;
// then checks every section of the result (troupe::node::ValidateConfig), so that a flag may
// supply what the file leaves out (the advertised host of a node listening on 0.0.0.0, say).
// kInvalidArgument names the bad field (and the flags given); kNotFound when the file cannot be
// read. With a static table (interconnect.nodes) the node must be listed in it; with etcd
// membership (interconnect.etcd) the config may leave node_id out: etcd gives one.
absl::StatusOr<proto::ActorSystemConfig> LoadNodeConfig(const std::string& path, uint32_t node_id,
                                                        const AddressFlags& addresses = {});

// Writes `node`, and on a second line `metrics_url` (where it serves GET /metrics, when it does),
// to `path` (through a temporary file and a rename: a reader never sees half). kInternal names the
// file that could not be written.
absl::Status WriteNodeIdFile(const std::string& path, NodeId node,
                             const std::string& metrics_url = "");
// Returns the id WriteNodeIdFile wrote to `path`, or 0 when there is none (yet); sets
// `*metrics_url` (when not null) to the URL written with it.
NodeId ReadNodeIdFile(const std::string& path, std::string* metrics_url = nullptr);

// Returns what troupe_node --testing_protocol=`versions` --testing_features=`features` announce:
// `versions` is "N" or "OLDEST..NEWEST" (empty: this build's), `features` a comma-separated list
// ("none": no feature; "build": this build's). kInvalidArgument names the flag at fault.
absl::StatusOr<interconnect::ProtocolRange> ParseTestingProtocol(absl::string_view versions,
                                                                 absl::string_view features);

// Makes sure the interconnect's info lines (sessions up and ended) reach the log, whatever level
// the config asked for.
void EnableSessionLogs();

// Prints a line each time a peer's session comes up or goes down, from Interconnect::Counters.
class SessionWatcher {
 public:
  SessionWatcher(NodeId self, const interconnect::Interconnect* ic) : self_(self), ic_(ic) {}

  // Reads the counters and prints one line per peer whose `up` changed since the last call.
  void Poll(std::FILE* out);
  // Prints one line of counters per peer (events and bytes each way, resends, duplicates,
  // backpressure stalls, protocol errors).
  void PrintCounters(std::FILE* out) const;

 private:
  NodeId self_;
  const interconnect::Interconnect* ic_;
  std::vector<interconnect::SessionCounters> last_;
};

}  // namespace troupe::examples
