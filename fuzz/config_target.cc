// SPDX-License-Identifier: Apache-2.0
//
// fuzz_config: the input is a config file's text, read as a node reads it (node/config.h: every
// section, each by its layer's validator). Checks, for any text:
//   - ParseConfig never crashes or aborts, and refuses with kInvalidArgument and a message;
//   - what it accepts passes ValidateConfig, prints back to text that parses to the same config
//     (TextFormat round trip), and WithDefaults of it still validates (Node::Start creates the
//     ActorSystem on the filled-in config);
//   - ValidateConfig on the same bytes read as a binary config never crashes either: it sees
//     values the text parser would reject (out-of-range enums, unset required fields).
// Debian's libprotobuf is not instrumented, so coverage guides the fuzzer only through the
// generated config classes and the three layers' config.cc; the seeds (examples' configs) carry
// the rest.
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/text_format.h"

#include "actors/check.h"
#include "fuzz/targets.h"
#include "node/config.h"
#include "proto/config.pb.h"

namespace troupe::fuzz {

using node::ParseConfig;
using node::ValidateConfig;
using node::WithDefaults;

void FuzzConfig(std::string_view data) {
  absl::StatusOr<proto::ActorSystemConfig> config = ParseConfig(data);
  if (!config.ok()) {
    TROUPE_CHECK(absl::IsInvalidArgument(config.status())) << config.status();
    TROUPE_CHECK(!config.status().message().empty());
  } else {
    absl::Status valid = ValidateConfig(*config);
    TROUPE_CHECK(valid.ok()) << "ParseConfig accepted what ValidateConfig refuses: " << valid;

    std::string printed;
    TROUPE_CHECK(google::protobuf::TextFormat::PrintToString(*config, &printed));
    absl::StatusOr<proto::ActorSystemConfig> reparsed = ParseConfig(printed);
    TROUPE_CHECK(reparsed.ok()) << "the printed config does not parse: " << reparsed.status()
                                << "\n"
                                << printed;
    TROUPE_CHECK(reparsed->SerializeAsString() == config->SerializeAsString())
        << "the printed config parses to another config:\n"
        << printed;

    const proto::ActorSystemConfig full = WithDefaults(*config);
    absl::Status full_valid = ValidateConfig(full);
    TROUPE_CHECK(full_valid.ok()) << "WithDefaults made a valid config invalid: " << full_valid;
  }

  proto::ActorSystemConfig binary;
  if (binary.ParseFromArray(data.data(), static_cast<int>(data.size()))) {
    absl::Status status = ValidateConfig(binary);
    TROUPE_CHECK(status.ok() || absl::IsInvalidArgument(status)) << status;
  }
}

}  // namespace troupe::fuzz
