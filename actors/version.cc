// SPDX-License-Identifier: Apache-2.0
// The macros are expanded here, inside the library, so that Version() reports the library's build
// even to a program compiled against other headers.
#include "actors/version.h"

namespace troupe {

VersionInfo Version() {
  return VersionInfo{.major = TROUPE_VERSION_MAJOR,
                     .minor = TROUPE_VERSION_MINOR,
                     .patch = TROUPE_VERSION_PATCH,
                     .version = TROUPE_VERSION_STRING,
                     .commit = TROUPE_GIT_COMMIT};
}

}  // namespace troupe
