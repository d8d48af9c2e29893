// SPDX-License-Identifier: Apache-2.0
#include "node/internal/log_levels_http.h"

#include <httplib.h>

#include <iterator>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#include "actors/log_json.h"

namespace troupe::node::internal {
namespace {

constexpr const char* kTextType = "text/plain; charset=utf-8";
// Not a level: drops a component's own level.
constexpr std::string_view kDefault = "default";

LogLevelsAnswer Refuse(int status, absl::string_view message) {
  return {status, kTextType, absl::StrCat(message, "\n")};
}

// A component's level, "(default)" style: "debug", or "info (the default)".
std::string Describe(const LogContext& context, LogComponent component) {
  const std::string_view level = LogLevelName(context.level(component));
  return absl::StrCat(absl::string_view(level.data(), level.size()),
                      context.HasOwnLevel(component) ? "" : " (the default)");
}

// Returns the one value of `name` in `params` ("" and false when absent), or a 400 when it is
// given more than once.
absl::StatusOr<std::pair<std::string, bool>> OneParam(
    const std::multimap<std::string, std::string>& params, const std::string& name) {
  const auto [begin, end] = params.equal_range(name);
  if (begin == end) {
    return std::pair<std::string, bool>("", false);
  }
  if (std::next(begin) != end) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": given twice"));
  }
  return std::pair<std::string, bool>(begin->second, true);
}

}  // namespace

LogLevelsAnswer GetLogLevels(const LogContext& context) {
  std::string body = absl::StrCat("{\"node\":", context.node_id(), ",\"format\":");
  AppendJsonString(LogFormatName(context.format()), &body);
  body.append(",\"level\":");
  AppendJsonString(LogLevelName(context.default_level()), &body);
  body.append(",\"components\":{");
  std::vector<std::string> own;
  bool first = true;
  for (const std::string& name : LogComponentNames()) {
    // The name exists, so this names nothing new.
    const LogComponent component = LogComponentNamed(name);
    body.append(first ? "" : ",");
    first = false;
    AppendJsonString(name, &body);
    body.push_back(':');
    AppendJsonString(LogLevelName(context.level(component)), &body);
    if (context.HasOwnLevel(component)) {
      own.push_back(name);
    }
  }
  body.append("},\"own_levels\":[");
  for (size_t i = 0; i < own.size(); ++i) {
    body.append(i == 0 ? "" : ",");
    AppendJsonString(own[i], &body);
  }
  body.append("]}\n");
  return {200, "application/json", std::move(body)};
}

LogLevelsAnswer PostLogLevels(LogContext& context,
                              const std::multimap<std::string, std::string>& params,
                              const std::string& client) {
  for (const auto& [name, value] : params) {
    if (name != "component" && name != "level") {
      return Refuse(
          400, absl::StrCat("unknown parameter \"", name, "\" (expected component and level)"));
    }
  }
  const absl::StatusOr<std::pair<std::string, bool>> component_param =
      OneParam(params, "component");
  const absl::StatusOr<std::pair<std::string, bool>> level_param = OneParam(params, "level");
  if (!component_param.ok() || !level_param.ok()) {
    return Refuse(400, (component_param.ok() ? level_param : component_param).status().message());
  }
  const auto& [component_name, has_component] = *component_param;
  const auto& [level_name, has_level] = *level_param;
  if (!has_level) {
    return Refuse(400,
                  "level: missing (trace, debug, info, warn or error; default with a component)");
  }
  std::optional<LogComponent> component;
  if (has_component) {
    absl::StatusOr<LogComponent> found = FindLogComponent(component_name);
    if (!found.ok()) {
      return Refuse(400, absl::StrCat("component: ", found.status().message()));
    }
    component = *found;
  }
  LogLevel level = LogLevel::kInfo;
  const bool clear = level_name == kDefault;
  if (clear && !component.has_value()) {
    return Refuse(400, "level: default needs a component (it drops that component's own level)");
  }
  if (!clear) {
    if (absl::Status parsed = ParseLogLevel(level_name, &level); !parsed.ok()) {
      return Refuse(400, absl::StrCat("level: ", parsed.message()));
    }
  }

  // httplib answers on threads of its own, which no node binds: the line must name this node and
  // follow its levels and format.
  const LogBinding binding(&context);
  if (!component.has_value()) {
    const std::string_view before = LogLevelName(context.default_level());
    context.SetDefaultLevel(level);
    TROUPE_LOG(kWarn, kConfig) << "default log level set to " << LogLevelName(level) << " (was "
                               << before << ") over HTTP by " << client;
  } else {
    const std::string before = Describe(context, *component);
    if (clear) {
      context.ClearLevel(*component);
    } else {
      context.SetLevel(level, *component);
    }
    TROUPE_LOG(kWarn, kConfig) << "log level of " << component_name << " set to "
                               << Describe(context, *component) << " (was " << before
                               << ") over HTTP by " << client;
  }
  return GetLogLevels(context);
}

void AddLogLevelRoutes(httplib::Server& server, LogContext* context) {
  const auto reply = [](const LogLevelsAnswer& answer, httplib::Response& response) {
    response.status = answer.status;
    response.set_content(answer.body, answer.content_type.c_str());
  };
  server.Get(
      "/loglevels", [context, reply](const httplib::Request& request, httplib::Response& response) {
        // A GET that looks like a change would otherwise answer 200 and change nothing.
        reply(request.params.empty()
                  ? GetLogLevels(*context)
                  : Refuse(400, "GET only reads the levels; change them with POST /loglevels"),
              response);
      });
  server.Post("/loglevels", [context, reply](const httplib::Request& request,
                                             httplib::Response& response) {
    // A browser adds Origin to a cross-origin POST, such as a form another site's page submits;
    // a command-line client sends none.
    const std::string origin = request.get_header_value("Origin");
    if (!origin.empty() && origin != absl::StrCat("http://", request.get_header_value("Host"))) {
      reply(Refuse(403, absl::StrCat("POST from another origin (", origin, ") refused")), response);
      return;
    }
    reply(PostLogLevels(*context, request.params,
                        absl::StrCat(request.remote_addr, ":", request.remote_port)),
          response);
  });
}

}  // namespace troupe::node::internal
