#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Checks the house rules that keep the layers apart (docs/design.md, actors/internal/README.md).
# The layers, each on the ones before it: proto/ and actors/, interconnect/, node/.
#   - actors/ never includes interconnect/ or node/;
#   - interconnect/ never includes node/;
#   - no file outside actors/ includes actors/internal/, except the white-box tests and the
#     benchmark of the mailbox data structure and the event pool themselves, and the tests of
#     thread lending (its rule, and pools resized by hand) (listed below);
#   - nothing outside actors/ reaches the runtime through a runtime() accessor;
#   - no Asio in a public header (actors/, interconnect/, node/);
#   - no library file over 650 lines (one concern per file), in actors/, interconnect/ and node/.
# Prints every violation and exits 1 when there is one.
set -euo pipefail
cd "$(dirname "$0")/.."

white_box='^(ut/actors/mailbox_test\.cc|ut/actors/mailbox_interleaving_test\.cc|ut/actors/small_alloc_test\.cc|ut/actors/thread_lending_test\.cc|ut/actors/pool_lending_test\.cc|bench/actors/mailbox_bench\.cc):'
failed=0
fail() {
  echo "layering: $1" >&2
  failed=1
}

sources=('*.h' '*.cc' '*.proto')
if hits=$(git grep -n -E '#include "(interconnect|node)/' -- 'actors/*' 'proto/*'); then
  fail "actors/ or proto/ includes interconnect/ or node/:"$'\n'"$hits"
fi
if hits=$(git grep -n '#include "node/' -- 'interconnect/*'); then
  fail "interconnect/ includes node/:"$'\n'"$hits"
fi
if hits=$(git grep -n '#include "actors/internal/' -- "${sources[@]}" ':!actors/*' |
  grep -Ev "$white_box"); then
  fail "a file outside actors/ includes actors/internal/ (use actors/node_hooks.h):"$'\n'"$hits"
fi
if hits=$(git grep -n 'runtime()' -- 'interconnect/*' 'node/*' 'actors/testing/*' 'examples/*'); then
  fail "runtime() used outside the runtime:"$'\n'"$hits"
fi
if hits=$(git grep -n -E '#include [<"]asio' -- 'actors/*.h' 'interconnect/*.h' 'node/*.h' \
  ':!interconnect/internal/*' ':!node/internal/*'); then
  fail "Asio in a public header:"$'\n'"$hits"
fi
while read -r lines file; do
  [[ "$file" == total ]] && continue
  if ((lines > 650)); then
    fail "$file has $lines lines (split it by concern)"
  fi
done < <(git ls-files 'actors/*.h' 'actors/*.cc' 'interconnect/*.h' 'interconnect/*.cc' 'node/*.h' \
  'node/*.cc' | xargs wc -l)

if ((failed)); then
  exit 1
fi
echo "layering: clean"
