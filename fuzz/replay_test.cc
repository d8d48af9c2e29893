// SPDX-License-Identifier: Apache-2.0
//
// Replays every committed fuzz input (fuzz/corpus/<target>/ and fuzz/regressions/<target>/)
// through its target's function, in every normal build (g++ and clang, Release and sanitizers):
// an input that once crashed a target stays a test. A violated invariant aborts the process; the
// path printed just before names the input (run it alone with `build/fuzz/fuzz/<target> <path>`).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "fuzz/targets.h"

namespace troupe::fuzz {

// Names the parameter in test output (gtest finds it by argument-dependent lookup).
void PrintTo(const Target& target, std::ostream* os) { *os << target.name; }

namespace {

// Returns the input files of `dir` in name order (none when it does not exist).
std::vector<std::filesystem::path> Inputs(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.is_regular_file() && entry.path().filename().string().front() != '.') {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class FuzzReplayTest : public ::testing::TestWithParam<Target> {};

TEST_P(FuzzReplayTest, CorpusAndRegressionsPass) {
  const Target& target = GetParam();
  const std::filesystem::path root = TROUPE_FUZZ_DIR;
  const std::vector<std::filesystem::path> corpus = Inputs(root / "corpus" / target.name);
  ASSERT_FALSE(corpus.empty()) << "no seeds in " << (root / "corpus" / target.name);
  std::vector<std::filesystem::path> inputs = corpus;
  for (const auto& path : Inputs(root / "regressions" / target.name)) {
    inputs.push_back(path);
  }
  for (const auto& path : inputs) {
    // Printed before the run: a failed check aborts the process, and this names the input.
    std::fprintf(stderr, "replay %s\n", path.c_str());
    target.run(ReadFile(path));
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzReplayTest, ::testing::ValuesIn(Targets()),
                         [](const ::testing::TestParamInfo<Target>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace troupe::fuzz
