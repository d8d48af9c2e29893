// SPDX-License-Identifier: Apache-2.0
#include "chaos.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace troupe::examples {

std::string ChaosKindName(ChaosAction::Kind kind) {
  switch (kind) {
    case ChaosAction::Kind::kKill:
      return "kill";
    case ChaosAction::Kind::kRestart:
      return "restart";
    case ChaosAction::Kind::kJoin:
      return "join";
    case ChaosAction::Kind::kLeave:
      return "leave";
  }
  return "?";
}

absl::StatusOr<std::vector<ChaosAction>> ParseChaosPlan(absl::string_view plan, int nodes,
                                                        int seconds) {
  std::vector<ChaosAction> actions;
  for (absl::string_view item : absl::StrSplit(plan, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    auto bad = [item](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("--chaos: '", item, "': ", why));
    };
    ChaosAction action;
    uint32_t node = 0;
    const size_t at = item.find('@');
    if (absl::StartsWith(item, "join@")) {
      action.kind = ChaosAction::Kind::kJoin;  // a new node: no number
    } else {
      const size_t colon = item.find(':');
      if (colon == absl::string_view::npos || at == absl::string_view::npos || at < colon) {
        return bad("want ACTION:NODE@SECONDS or join@SECONDS, e.g. kill:2@1.5");
      }
      const absl::string_view kind = item.substr(0, colon);
      if (kind == "kill") {
        action.kind = ChaosAction::Kind::kKill;
      } else if (kind == "restart") {
        action.kind = ChaosAction::Kind::kRestart;
      } else if (kind == "leave") {
        action.kind = ChaosAction::Kind::kLeave;
      } else {
        return bad("the action is kill, restart, leave or join");
      }
      if (!absl::SimpleAtoi(item.substr(colon + 1, at - colon - 1), &node) || node < 1 ||
          node > static_cast<uint32_t>(nodes)) {
        return bad(absl::StrCat("the node is one of 1..", nodes));
      }
    }
    double when = 0;
    if (!absl::SimpleAtod(item.substr(at + 1), &when) || !std::isfinite(when) || when < 0 ||
        when >= seconds) {
      return bad(absl::StrCat("the time is a number of seconds from 0 to below --seconds (",
                              seconds, ")"));
    }
    action.node = node;
    action.at = absl::Seconds(when);
    actions.push_back(action);
  }
  if (actions.empty()) {
    return absl::InvalidArgumentError("--chaos: no action (want e.g. kill:2@1,restart:2@2)");
  }
  std::stable_sort(actions.begin(), actions.end(),
                   [](const ChaosAction& a, const ChaosAction& b) { return a.at < b.at; });
  std::map<uint32_t, bool> down;
  for (const ChaosAction& action : actions) {
    if (action.kind == ChaosAction::Kind::kJoin) {
      continue;
    }
    const bool stop = action.kind != ChaosAction::Kind::kRestart;
    if (down[action.node] == stop) {
      return absl::InvalidArgumentError(
          absl::StrCat("--chaos: ", ChaosKindName(action.kind), ":", action.node, "@",
                       absl::ToDoubleSeconds(action.at), ": node ", action.node,
                       stop ? " is down already at that time" : " is not down at that time"));
    }
    down[action.node] = stop;
  }
  return actions;
}

std::string ChaosCsvRow(const ChaosEvent& event) {
  return absl::StrFormat("%.3f,%u,%s,%d\n", event.second, event.node, event.action, event.pid);
}

absl::StatusOr<std::vector<ChaosEvent>> ReadChaosLog(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  }
  std::vector<ChaosEvent> events;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (number == 1 || line.empty()) {
      continue;  // the header
    }
    const std::vector<absl::string_view> fields = absl::StrSplit(line, ',');
    ChaosEvent event;
    if (fields.size() != 4 || !absl::SimpleAtod(fields[0], &event.second) ||
        !absl::SimpleAtoi(fields[1], &event.node) || !absl::SimpleAtoi(fields[3], &event.pid) ||
        (fields[2] != "kill" && fields[2] != "restart" && fields[2] != "join" &&
         fields[2] != "leave" && fields[2] != kRollLeave && fields[2] != kRollReady)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number, ": want ", kChaosCsvHeader, ", got '", line, "'"));
    }
    event.action.assign(fields[2].data(), fields[2].size());
    events.push_back(std::move(event));
  }
  // A row waits for the id of a node started by a restart or a join: rows may come out of order.
  std::stable_sort(events.begin(), events.end(),
                   [](const ChaosEvent& a, const ChaosEvent& b) { return a.second < b.second; });
  return events;
}

absl::Status WriteLoadStart(const std::string& path, absl::Time start) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << absl::ToUnixMicros(start) << "\n";
    if (!out.flush()) {
      return absl::InternalError(absl::StrCat("cannot write ", temporary));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", temporary, " to ", path));
  }
  return absl::OkStatus();
}

std::optional<absl::Time> ReadLoadStart(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  int64_t micros = 0;
  if (!std::getline(in, line) || !absl::SimpleAtoi(line, &micros)) {
    return std::nullopt;
  }
  return absl::FromUnixMicros(micros);
}

}  // namespace troupe::examples
