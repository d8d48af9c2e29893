// SPDX-License-Identifier: Apache-2.0
//
// The command line every example binary shares: `--help`, `--version`, flag errors and the exit
// statuses below. Each main calls ParseFlagsOrExit instead of absl::ParseCommandLine.
//
//   | status | constant    | means                                                              |
//   |--------|-------------|--------------------------------------------------------------------|
//   | 0      | kExitOk     | the run succeeded (and `--help`, `--version`)                      |
//   | 1      | kExitFailed | the run failed: an event undelivered, a node down, no free port... |
//   | 2      | kExitUsage  | bad command line: unknown flag, bad or out-of-range value,         |
//   |        |             | missing required flag, stray argument                              |
//   | 3      | kExitConfig | bad config: a file that cannot be read or parsed, or a field that  |
//   |        |             | fails validation (the message names it)                            |
//
// Abseil 20220623's ParseCommandLine exits 1 on `--help` and on every flag error, which would
// mix them up with a failed run; ParseFlagsOrExit answers `--help` and `--version` itself and
// checks every argument (with the public reflection API) before abseil parses them.
//
// Thread-safety: call once, from main, before any thread exists.
//
// Example:
//
//   int main(int argc, char** argv) {
//     troupe::examples::ParseFlagsOrExit(argc, argv, "Runs one node of a cluster.");
//     ...
//     return ok ? troupe::examples::kExitOk : troupe::examples::kExitFailed;
//   }
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace troupe::examples {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitConfig = 3;

// Returns the exit-status paragraph every binary's --help ends with.
std::string ExitStatusHelp();

// Returns "<program> (Troupe) <version> (commit <git commit>)", as `--version` prints it: the
// version and commit of the Troupe library the binary runs with (troupe::Version(),
// actors/version.h); the commit is "unknown" for a build outside a git checkout.
std::string VersionLine(absl::string_view program);

// Returns the command line `argv` as a shell would take it back: the words joined by spaces, one
// holding a space, a quote or another shell character in single quotes.
std::string CommandLine(int argc, const char* const* argv);

// Sets the usage message and parses argv into the ABSL_FLAGs. Exits (never returns) with kExitOk
// after printing the help to stdout on `--help`, `-h`, `--helpfull` (also abseil's own flags),
// `--helpshort`, `--helpon`, `--helpmatch` or `--helppackage`, and after printing VersionLine on
// `--version`; with kExitUsage after one line on stderr on an unknown flag, a value that does
// not parse, a missing value or a positional argument. Errors inside a --flagfile or --fromenv
// are abseil's own lines, with kExitUsage too.
void ParseFlagsOrExit(int argc, char** argv, absl::string_view usage);

}  // namespace troupe::examples
