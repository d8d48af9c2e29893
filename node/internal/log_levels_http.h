// SPDX-License-Identifier: Apache-2.0
//
// /loglevels on a node's MonitoringServer (node/monitoring.h): its operator reads and changes the
// running node's log levels (LogContext, actors/log.h) without a restart.
//
//   | request                                   | effect                                       |
//   |-------------------------------------------|----------------------------------------------|
//   | GET /loglevels                            | none; answers the levels (below)             |
//   | POST /loglevels?level=debug               | sets the default level; components with a    |
//   |                                           | level of their own keep it                   |
//   | POST /loglevels?component=interconnect    | gives the component a level of its own       |
//   |      &level=debug                         |                                              |
//   | POST /loglevels?component=interconnect    | drops the component's own level: it follows  |
//   |      &level=default                       | the default level again                      |
// Parameters come in the query string or an application/x-www-form-urlencoded body
// (`curl -d component=interconnect -d level=debug http://127.0.0.1:9464/loglevels`). Levels are
// trace, debug, info, warn, error; a component is a built-in one or one the process has named
// (FindLogComponent: a request never names a new one). GET and a successful POST answer 200 with
// the node's levels after the change, as JSON:
//
//   {"node":1,"format":"text","level":"info",
//    "components":{"actors":"info","scheduler":"info","config":"info","interconnect":"debug",
//                  "user":"info","billing":"warn"},
//    "own_levels":["interconnect","billing"]}
//
// `components` has every component's current level, `own_levels` those set apart from `level`.
// A bad request changes nothing and answers 400 with one line naming the parameter:
// `component: unknown component "interconect" (did you mean "interconnect"?)`, `level: unknown log
// level "loud" (expected trace, debug, info, warn or error)`, `level: missing`, `unknown parameter
// "componnet" (expected component and level)`, `component: given twice`. Each change is logged at
// warn (component config) with the client's address and the levels before and after.
//
// Security: the server listens on 127.0.0.1 unless monitoring.host says otherwise, and any
// process on the machine (any user) that can reach the port can change the levels, for instance
// to trace, which makes the node write far more. There is no authentication: keep the port on
// loopback or behind a firewall. A POST that a web page of another origin makes a browser send
// (its Origin header is not this server's) is refused with 403, so a page open in a browser on
// the machine cannot change the levels.
//
// Thread-safety: thread-safe (LogContext is).
#pragma once

#include <map>
#include <string>

#include "actors/log.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace troupe::node::internal {

// One answer: the HTTP status, its content type and body.
struct LogLevelsAnswer {
  int status = 200;
  std::string content_type;
  std::string body;
};

// Returns GET /loglevels' answer for `context`.
LogLevelsAnswer GetLogLevels(const LogContext& context);

// Applies POST /loglevels' `params` (name to value, as parsed from the query and the body) to
// `context` and returns the answer; `client` names the caller in the log line.
LogLevelsAnswer PostLogLevels(LogContext& context,
                              const std::multimap<std::string, std::string>& params,
                              const std::string& client);

// Registers GET and POST /loglevels on `server`, for `context`, which must outlive the server.
void AddLogLevelRoutes(httplib::Server& server, LogContext* context);

}  // namespace troupe::node::internal
