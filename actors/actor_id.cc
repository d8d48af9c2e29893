// SPDX-License-Identifier: Apache-2.0
#include "actors/actor_id.h"

#include "absl/strings/str_cat.h"

namespace troupe {

std::string ActorId::ServiceName() const {
  std::string name;
  name.reserve(kMaxServiceNameSize);
  for (size_t i = 0; i < kMaxServiceNameSize; ++i) {
    const uint64_t byte = i < 8 ? (local_id_ >> (8 * i)) & 0xFF : (hint_ >> (8 * (i - 8))) & 0xFF;
    if (byte == 0) {
      break;
    }
    name.push_back(static_cast<char>(byte));
  }
  return name;
}

std::string ActorId::ToString() const {
  if (IsService()) {
    return absl::StrCat("[svc:", ServiceName(), "@", node_id(), "]");
  }
  return absl::StrCat("[", node_id(), ":", pool(), ":", local_id_, ":", hint_, "]");
}

std::ostream& operator<<(std::ostream& out, const ActorId& id) { return out << id.ToString(); }

}  // namespace troupe
