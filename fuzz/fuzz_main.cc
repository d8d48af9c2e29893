// SPDX-License-Identifier: Apache-2.0
//
// The libFuzzer entry point of one fuzz executable: fuzz/CMakeLists.txt compiles this file once
// per target with TROUPE_FUZZ_FUNCTION naming the target's function (fuzz/targets.h).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "google/protobuf/stubs/logging.h"

#include "fuzz/targets.h"

// libprotobuf logs every string field with invalid UTF-8 it parses: millions of lines that would
// drown libFuzzer's own output and slow every run.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  troupe::fuzz::TROUPE_FUZZ_FUNCTION(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
