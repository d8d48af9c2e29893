#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Fails when a code example in the docs is not, word for word, code that the build compiles.
#
# The examples checked:
#   - every ```cpp block of README.md and docs/*.md;
#   - every "// Example...:" block of a public header (actors/, actors/testing/, interconnect/,
#     interconnect/testing/, node/; not internal/): the "//   " lines after the "// Example...:"
#     line and one "//" line.
# Each must equal, after removing the common indentation, a region of a compiled source file
# marked
#     // [doc-example: README.md]                 (the doc that quotes the region)
#     ...the code...
#     // [end doc-example]
# and each such region must equal an example of the doc it names, so that editing either side
# alone fails this check. The region's surroundings supply what the example leaves out (includes,
# events, the class a member function belongs to) and a test that runs it (ut/docs/).
#
# A Markdown block that is not meant to compile on its own (a fragment of pseudo-code) is marked
# on the line before its fence:
#     <!-- doc-example: not compiled (why) -->
#
#   scripts/check-doc-examples.sh [--skip FILE]...   # FILE: a doc or header not checked (yet)
set -euo pipefail
cd "$(dirname "$0")/.."

skip=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --skip) skip+=("$2"); shift 2 ;;
    *) echo "usage: $0 [--skip FILE]..." >&2; exit 2 ;;
  esac
done

is_skipped() {
  local file
  for file in "${skip[@]+"${skip[@]}"}"; do
    [[ "$file" == "$1" ]] && return 0
  done
  return 1
}

markdown=()
for file in README.md docs/*.md; do
  [[ -f "$file" ]] && ! is_skipped "$file" && markdown+=("$file")
done
headers=()
while IFS= read -r file; do
  is_skipped "$file" || headers+=("$file")
done < <(find actors interconnect node -maxdepth 2 -name '*.h' -not -path '*/internal/*' \
           2>/dev/null | sort)
mapfile -t sources < <(grep -rl --include='*.cc' --include='*.h' '\[doc-example: ' \
                         actors interconnect node ut examples bench 2>/dev/null | sort || true)

# Each extractor prints one line per example: DOC <tab> LOCATION <tab> the lines joined by \x1f,
# the common indentation and trailing blanks removed.
emit_awk='
function emit(doc, where,    i, min, indent, text, first, last) {
  first = 0; last = n - 1
  while (first <= last && buf[first] ~ /^[ \t]*$/) first++
  while (last >= first && buf[last] ~ /^[ \t]*$/) last--
  min = -1
  for (i = first; i <= last; i++) {
    sub(/[ \t]+$/, "", buf[i])
    if (buf[i] == "") continue
    match(buf[i], /^ */)
    if (min < 0 || RLENGTH < min) min = RLENGTH
  }
  text = ""
  for (i = first; i <= last; i++) {
    text = text (i > first ? "\x1f" : "") substr(buf[i], min + 1)
  }
  printf "%s\t%s\t%s\n", doc, where, text
  n = 0
}'

{
  for file in "${markdown[@]+"${markdown[@]}"}"; do
    awk -v doc="$file" "$emit_awk"'
      !open && /^[ ]*```cpp[ ]*$/ {
        open = 1; n = 0; start = FNR; skip = (prev ~ /<!-- doc-example: not compiled/); next
      }
      open && /^[ ]*```[ ]*$/ { open = 0; if (!skip) emit(doc, doc ":" start); next }
      open { buf[n++] = $0; next }
      !/^[ \t]*$/ { prev = $0 }' "$file"
  done
  for file in "${headers[@]+"${headers[@]}"}"; do
    awk -v doc="$file" "$emit_awk"'
      state == 2 && (/^\/\/   / || /^\/\/$/) { buf[n++] = substr($0, 3); next }
      state == 2 { emit(doc, doc ":" start); state = 0 }
      state == 1 && /^\/\/$/ { state = 2; next }
      state == 1 { state = 0 }
      /^\/\/ Example.*:$/ { state = 1; n = 0; start = FNR }
      END { if (state == 2) emit(doc, doc ":" start) }' "$file"
  done
} > /tmp/troupe-doc-examples.$$.docs

{
  for file in "${sources[@]+"${sources[@]}"}"; do
    awk -v source="$file" "$emit_awk"'
      match($0, /\/\/ \[doc-example: [^]]+\]/) {
        doc = substr($0, RSTART + 17, RLENGTH - 18); open = 1; n = 0; start = FNR; next
      }
      open && /\/\/ \[end doc-example\]/ { open = 0; emit(doc, source ":" start); next }
      open { buf[n++] = $0 }
      END { if (open) printf "%s\t%s:%d\tUNTERMINATED\n", doc, source, start }' "$file"
  done
} > /tmp/troupe-doc-examples.$$.regions
trap 'rm -f /tmp/troupe-doc-examples.$$.docs /tmp/troupe-doc-examples.$$.regions' EXIT

awk -F'\t' '
  function show(text,    lines, count, i) {
    count = split(text, lines, "\x1f")
    for (i = 1; i <= count && i <= 4; i++) printf "      | %s\n", lines[i]
    if (count > 4) printf "      | ... (%d lines)\n", count
  }
  FNR == NR { key = $1 "\t" $3; need[key]++; where[key] = where[key] " " $2; docs++; next }
  $3 == "UNTERMINATED" { printf "%s: region for %s has no [end doc-example]\n", $2, $1; bad++; next }
  { key = $1 "\t" $3; have[key]++; rwhere[key] = rwhere[key] " " $2; regions++ }
  END {
    for (key in need) {
      if (need[key] > have[key]) {
        split(key, part, "\t")
        printf "not compiled:%s: no region // [doc-example: %s] holds this example\n", where[key], part[1]
        show(part[2]); bad++
      }
    }
    for (key in have) {
      if (have[key] > need[key]) {
        split(key, part, "\t")
        printf "stale region:%s: %s has no example with this text (changed on one side only?)\n", rwhere[key], part[1]
        show(part[2]); bad++
      }
    }
    if (bad) { printf "doc examples: %d problem(s); %d examples, %d regions\n", bad, docs, regions; exit 1 }
    printf "doc examples: %d examples, each compiled (%d regions)\n", docs, regions
  }' /tmp/troupe-doc-examples.$$.docs /tmp/troupe-doc-examples.$$.regions
