// SPDX-License-Identifier: Apache-2.0
#include "cli.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

#include "actors/version.h"

namespace troupe::examples {

namespace {

// Set while absl::ParseCommandLine runs: it calls std::exit(1) on an error we could not see
// beforehand (inside a --flagfile or --fromenv), and ExitUsageWhileParsing turns that into
// kExitUsage.
bool parsing = false;

void ExitUsageWhileParsing() {
  if (parsing) {
    std::fflush(nullptr);
    std::_Exit(kExitUsage);
  }
}

std::string ProgramName(const char* argv0) {
  const absl::string_view path = argv0 != nullptr ? argv0 : "troupe";
  const size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path : path.substr(slash + 1));
}

[[noreturn]] void FailUsage(const std::string& program, const std::string& message) {
  std::fprintf(stderr, "%s: %s (see --help)\n", program.c_str(), message.c_str());
  std::exit(kExitUsage);  // NOLINT(concurrency-mt-unsafe): from main, before any thread
}

// Appends `text` to `out` in lines of at most `width` characters, each after `indent`.
void AppendWrapped(absl::string_view text, size_t indent, size_t width, std::string* out) {
  std::string line;
  for (absl::string_view word : absl::StrSplit(text, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      absl::StrAppend(out, std::string(indent, ' '), line, "\n");
      line.clear();
    }
    absl::StrAppend(&line, line.empty() ? "" : " ", word);
  }
  if (!line.empty()) {
    absl::StrAppend(out, std::string(indent, ' '), line, "\n");
  }
}

// The binary's own flags (abseil's too with `full`), sorted by name, then the usage flags and
// the exit statuses.
std::string Help(const std::string& program, bool full) {
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (full || !absl::StrContains(flag->Filename(), "absl/")) {
      flags.push_back(flag);
    }
  }
  std::sort(flags.begin(), flags.end(),
            [](const absl::CommandLineFlag* a, const absl::CommandLineFlag* b) {
              return a->Name() < b->Name();
            });
  std::string help = absl::StrCat(VersionLine(program), "\n");
  AppendWrapped(absl::ProgramUsageMessage(), 0, 100, &help);
  absl::StrAppend(&help, "\nUsage: ", program, " [--flag=value ...]\n\nFlags:\n");
  for (const absl::CommandLineFlag* flag : flags) {
    const std::string value = flag->DefaultValue();
    absl::StrAppend(&help, "  --", flag->Name(), " (default: ",
                    flag->IsOfType<std::string>() ? absl::StrCat("\"", value, "\"") : value, ")\n");
    AppendWrapped(flag->Help(), 6, 94, &help);
  }
  absl::StrAppend(&help,
                  "  --help, -h\n      prints this help and exits 0; --helpfull adds abseil's "
                  "flags (--flagfile, --fromenv, ...)\n"
                  "  --version\n      prints \"",
                  VersionLine(program), "\" and exits 0\n\n");
  AppendWrapped(ExitStatusHelp(), 0, 100, &help);
  return help;
}

bool IsHelpFlag(absl::string_view name) {
  return name == "h" || name == "help" || name == "helpfull" || name == "helpshort" ||
         name == "helpon" || name == "helpmatch" || name == "helppackage";
}

// Abseil's flags whose values name more arguments; ParseCommandLine reads and checks those.
bool IsGeneratorFlag(absl::string_view name) {
  return name == "flagfile" || name == "fromenv" || name == "tryfromenv" || name == "undefok";
}

// Returns the names listed by --undefok (abseil accepts those flags unknown).
std::vector<std::string> UndefinedOk(int argc, char** argv) {
  std::vector<std::string> names;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    for (const absl::string_view prefix : {"--undefok=", "-undefok="}) {
      if (absl::StartsWith(arg, prefix)) {
        for (absl::string_view name :
             absl::StrSplit(arg.substr(prefix.size()), ',', absl::SkipEmpty())) {
          names.emplace_back(name);
        }
      }
    }
  }
  return names;
}

// Checks argv as abseil will read it (`--name=value`, `--name value` unless bool, `--name` and
// `--noname` for a bool, one dash or two, `--` ends the flags); answers --help and --version.
// A value is checked by parsing it into its flag: ParseCommandLine sets the same values again
// right after (a FlagSaver would undo it, but logs each flag it restores).
void PreScan(const std::string& program, int argc, char** argv) {
  const std::vector<std::string> undefok = UndefinedOk(argc, argv);
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") {
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      continue;  // a positional argument: ParseCommandLine returns it and it is reported then
    }
    const absl::string_view body = arg.substr(arg[1] == '-' ? 2 : 1);
    const size_t equals = body.find('=');
    const absl::string_view name = body.substr(0, equals);
    const bool has_value = equals != absl::string_view::npos;
    std::string value(has_value ? body.substr(equals + 1) : "");
    if (IsHelpFlag(name)) {
      std::fputs(Help(program, name == "helpfull").c_str(), stdout);
      std::exit(kExitOk);  // NOLINT(concurrency-mt-unsafe): from main, before any thread
    }
    if (name == "version") {
      std::printf("%s\n", VersionLine(program).c_str());
      std::exit(kExitOk);  // NOLINT(concurrency-mt-unsafe): from main, before any thread
    }
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) {
      const absl::CommandLineFlag* negated =
          absl::StartsWith(name, "no") ? absl::FindCommandLineFlag(name.substr(2)) : nullptr;
      if (negated != nullptr && negated->IsOfType<bool>() && !has_value) {
        continue;
      }
      if (std::find(undefok.begin(), undefok.end(), name) != undefok.end()) {
        continue;
      }
      FailUsage(program, absl::StrCat("unknown flag --", name));
    }
    if (!has_value) {
      if (flag->IsOfType<bool>()) {
        continue;
      }
      if (i + 1 >= argc) {
        FailUsage(program, absl::StrCat("--", name, ": missing value"));
      }
      value = argv[++i];
    }
    if (IsGeneratorFlag(name)) {
      continue;
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      FailUsage(program, absl::StrCat("--", name, "=", value, ": ", error));
    }
  }
}

}  // namespace

std::string ExitStatusHelp() {
  return "Exit status: 0 the run succeeded (also after --help and --version); 1 the run failed; "
         "2 bad command line (unknown flag, bad or out-of-range value, missing flag, stray "
         "argument); 3 bad config (a file that cannot be read or parsed, or a field out of "
         "range; the message names it).\n";
}

std::string VersionLine(absl::string_view program) {
  const VersionInfo version = Version();
  return absl::StrCat(program, " (Troupe) ", version.version, " (commit ", version.commit, ")");
}

std::string CommandLine(int argc, const char* const* argv) {
  std::string line;
  for (int i = 0; i < argc; ++i) {
    const absl::string_view word = argv[i];
    absl::StrAppend(&line, i == 0 ? "" : " ");
    if (!word.empty() && word.find_first_of(" \t\n'\"\\$`*?;&|<>()[]{}~#") == word.npos) {
      absl::StrAppend(&line, word);
    } else {
      absl::StrAppend(&line, "'", absl::StrReplaceAll(word, {{"'", "'\\''"}}), "'");
    }
  }
  return line;
}

void ParseFlagsOrExit(int argc, char** argv, absl::string_view usage) {
  const std::string program = ProgramName(argc > 0 ? argv[0] : nullptr);
  absl::SetProgramUsageMessage(usage);
  PreScan(program, argc, argv);
  std::atexit(ExitUsageWhileParsing);
  parsing = true;
  const std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  parsing = false;
  if (rest.size() > 1) {
    FailUsage(program, absl::StrCat("unexpected argument '", rest[1], "'"));
  }
}

}  // namespace troupe::examples
