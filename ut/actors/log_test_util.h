// SPDX-License-Identifier: Apache-2.0
//
// Reading JSON log lines back in tests (log_test.cc, log_format_test.cc): protobuf's strict JSON
// parser into a google.protobuf.Struct, and a record's string fields.
#pragma once

#include <string>

#include "absl/strings/match.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace troupe::testutil {

// Parses one JSON log line strictly (a syntax error, a bad escape or invalid UTF-8 fails); fails
// the test and returns an empty Struct when it does not parse or spans more than one line.
inline google::protobuf::Struct ParseLogLine(const std::string& line) {
  google::protobuf::Struct record;
  const auto status = google::protobuf::util::JsonStringToMessage(line, &record);
  EXPECT_TRUE(status.ok()) << status.ToString() << " in " << line;
  EXPECT_FALSE(absl::StrContains(line, "\n")) << line;
  return record;
}

// Returns the string at `key`, or "<absent>".
inline std::string LogField(const google::protobuf::Struct& record, const std::string& key) {
  const auto it = record.fields().find(key);
  return it == record.fields().end() ? "<absent>" : it->second.string_value();
}

}  // namespace troupe::testutil
