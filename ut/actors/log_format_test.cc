// SPDX-License-Identifier: Apache-2.0
//
// The JSON log format (`log { format: "json" }`): every line parses back with protobuf's strict
// JSON parser, whatever bytes the message holds (quotes, backslashes, every control character,
// JSON of its own, invalid UTF-8), one record per line; the escaper itself byte for byte; the
// format per node, process-wide for plain threads, and its config field checked by name. A
// handler's JSON line with every field is in log_test.cc.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "gtest/gtest.h"

#include "actors/config.h"
#include "actors/log.h"
#include "actors/log_json.h"
#include "ut/actors/log_test_util.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using google::protobuf::Struct;
using testutil::LogField;
using testutil::ParseLogLine;
using testutil::SmallConfig;

// Sets the process-wide format for its lifetime.
class ProcessFormat {
 public:
  explicit ProcessFormat(LogFormat format) { SetLogFormat(format); }
  ~ProcessFormat() { SetLogFormat(LogFormat::kText); }
  ProcessFormat(const ProcessFormat&) = delete;
  ProcessFormat& operator=(const ProcessFormat&) = delete;
  ProcessFormat(ProcessFormat&&) = delete;
  ProcessFormat& operator=(ProcessFormat&&) = delete;
};

TEST(LogFormatTest, HostileMessagesStayOneParsableRecordEach) {
  CapturingLogSink sink;
  LogContext context(9);
  context.SetFormat(LogFormat::kJson);
  const LogBinding binding(&context);
  std::string every_control;
  for (int c = 0; c < 0x20; ++c) {
    every_control.push_back(static_cast<char>(c));
  }
  every_control.push_back('\x7f');
  // (message, what the record's message must read back as)
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"say \"hi\" \\ back\\slash \\\"", "say \"hi\" \\ back\\slash \\\""},
      {"two\nlines\r\nand\ttab", "two\nlines\r\nand\ttab"},
      {every_control, every_control},
      {"\",\"level\":\"error\"}\n{\"injected\":true",
       "\",\"level\":\"error\"}\n{\"injected\":true"},
      {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
      {"bad \xff byte", "bad \xef\xbf\xbd byte"},
      {"lone \x80 continuation", "lone \xef\xbf\xbd continuation"},
      {"overlong \xc0\xaf slash", "overlong \xef\xbf\xbd\xef\xbf\xbd slash"},
      {"surrogate \xed\xa0\x80", "surrogate \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"too high \xf4\x90\x80\x80", "too high \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"truncated \xe2\x82", "truncated \xef\xbf\xbd\xef\xbf\xbd"},
      {std::string(10000, 'x') + "\x01", std::string(10000, 'x') + "\x01"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    TROUPE_LOG(kWarn, kUser) << "case " << i << ": " << cases[i].first;
  }
  const std::vector<std::string> lines = sink.Lines();
  ASSERT_EQ(lines.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const Struct record = ParseLogLine(lines[i]);
    EXPECT_EQ(LogField(record, "message"), absl::StrCat("case ", i, ": ", cases[i].second))
        << "case " << i << ": " << lines[i];
    EXPECT_EQ(LogField(record, "level"), "warn");
    EXPECT_EQ(record.fields().at("node").number_value(), 9);
    EXPECT_EQ(record.fields().count("injected"), 0u);
  }
  // NUL and the other controls are \u escapes, never raw bytes.
  EXPECT_TRUE(absl::StrContains(lines[2], "\\u0000\\u0001")) << lines[2];
  EXPECT_TRUE(absl::StrContains(lines[2], "\\b\\t\\n\\u000b\\f\\r")) << lines[2];
}

TEST(LogFormatTest, TheEscaperWritesTheShortestValidJson) {
  const auto escaped = [](std::string_view text) {
    std::string out = "x";
    AppendJsonString(text, &out);
    return out;
  };
  EXPECT_EQ(escaped(""), "x\"\"");
  EXPECT_EQ(escaped("plain text"), "x\"plain text\"");
  EXPECT_EQ(escaped("a\"b\\c/d"), "x\"a\\\"b\\\\c/d\"");
  EXPECT_EQ(escaped(std::string("\0\x1f\x7f", 3)), "x\"\\u0000\\u001f\x7f\"");
  EXPECT_EQ(escaped("\b\f\n\r\t"), "x\"\\b\\f\\n\\r\\t\"");
  EXPECT_EQ(escaped("\xc2\xa0\xef\xbf\xbf\xf4\x8f\xbf\xbf"),
            "x\"\xc2\xa0\xef\xbf\xbf\xf4\x8f\xbf\xbf\"");
  EXPECT_EQ(escaped("\xc1\xbf"), "x\"\xef\xbf\xbd\xef\xbf\xbd\"");
  EXPECT_EQ(escaped("\xe0\x9f\xbf"), "x\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
  EXPECT_EQ(escaped("\xf0\x8f\xbf\xbf"), "x\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
  EXPECT_EQ(escaped("end \xf0\x9f\x98"), "x\"end \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");

  // [doc-example: actors/log_json.h]
  std::string out = "{\"name\":";
  troupe::AppendJsonString("say \"hi\"\n", &out);  // {"name":"say \"hi\"\n"
  // [end doc-example]
  EXPECT_EQ(out, "{\"name\":\"say \\\"hi\\\"\\n\"");
}

TEST(LogFormatTest, TheFormatIsPerNodeAndProcessWideForPlainThreads) {
  CapturingLogSink sink;
  LogContext json_node(1);
  json_node.SetFormat(LogFormat::kJson);
  LogContext text_node(2);
  {
    const LogBinding binding(&json_node);
    TROUPE_LOG(kWarn, kUser) << "from the json node";
  }
  {
    const LogBinding binding(&text_node);
    TROUPE_LOG(kWarn, kUser) << "from the text node";
  }
  TROUPE_LOG(kWarn, kUser) << "from a plain thread";
  EXPECT_TRUE(absl::StartsWith(sink.LinesWith("from the json node").front(), "{"));
  EXPECT_TRUE(
      absl::StrContains(sink.LinesWith("from the text node").front(), " warn node=2 thread="));
  EXPECT_FALSE(absl::StartsWith(sink.LinesWith("from a plain thread").front(), "{"));
  {
    // Process-wide: plain threads and every node that exists.
    const ProcessFormat json(LogFormat::kJson);
    EXPECT_EQ(text_node.format(), LogFormat::kJson);
    TROUPE_LOG(kWarn, kUser) << "plain thread, json";
    const Struct record = ParseLogLine(sink.LinesWith("plain thread, json").front());
    EXPECT_EQ(record.fields().count("node"), 0u);
    EXPECT_EQ(LogField(record, "message"), "plain thread, json");
  }
  TROUPE_LOG(kWarn, kUser) << "plain thread, text again";
  EXPECT_FALSE(absl::StartsWith(sink.LinesWith("plain thread, text again").front(), "{"));
  // Recent warnings keep the line as written.
  EXPECT_TRUE(absl::StrContains(RecentWarnings(8).back(), "plain thread, text again"));
}

TEST(LogFormatTest, TheConfigsFormatIsCheckedByName) {
  proto::ActorSystemConfig config = SmallConfig();
  config.mutable_log()->set_format("yaml");
  const absl::Status status = ValidateConfig(config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "log.format: unknown log format \"yaml\" (expected text or json)");
  config.mutable_log()->set_format("JSON");
  EXPECT_FALSE(ValidateConfig(config).ok()) << "names are lower-case, as levels are";
  config.mutable_log()->set_format("json");
  EXPECT_TRUE(ValidateConfig(config).ok());
  config.mutable_log()->clear_format();
  EXPECT_EQ(WithDefaults(config).log().format(), "text");
  LogFormat format = LogFormat::kJson;
  EXPECT_TRUE(ParseLogFormat("text", &format).ok());
  EXPECT_EQ(format, LogFormat::kText);
  EXPECT_EQ(LogFormatName(LogFormat::kJson), "json");
}

}  // namespace
}  // namespace troupe
