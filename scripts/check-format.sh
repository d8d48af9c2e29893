#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Fails when clang-format (the repo's .clang-format) would change any C++ file in the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.h' '*.cc')
[[ ${#files[@]} -eq 0 ]] && exit 0
clang-format --dry-run -Werror "${files[@]}"
echo "format: ${#files[@]} files clean"
