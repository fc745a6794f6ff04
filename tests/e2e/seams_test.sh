#!/usr/bin/env bash
# Issue 22's "done when" checks, kept true (docs/design.md): one place forks, one file turns
# errno into text, no raw close() outside base/, CLI11 in one unit, no text-order script.
set -euo pipefail
src="${GPUMAN_SOURCE_DIR:?}/src"
fail=0
check() {  # NAME WANT GOT DETAIL
  if [ "$3" != "$2" ]; then echo "FAIL $1: want $2, got $3"; echo "$4"; fail=1; else echo "ok   $1"; fi
}
forks=$(grep -rn 'fork()' "$src" || true)
check "fork() only in base/spawn.cc" 1 "$(printf '%s' "$forks" | grep -c . || true)" "$forks"
errno_text=$(grep -rln strerror "$src" || true)
check "strerror only in base/posix_error.h" "$src/base/posix_error.h" "$errno_text" "$errno_text"
raw_close=$(grep -rnE '(^|[^_a-zA-Z0-9.>])close\(' "$src" --include=*.cc --include=*.h | grep -v "^$src/base/" || true)
check "no raw close( outside base/" 0 "$(printf '%s' "$raw_close" | grep -c . || true)" "$raw_close"
cli11=$(grep -rln 'CLI/CLI.hpp' "$src" || true)
check "CLI/CLI.hpp in one file" "$src/cli/cli_options.cc" "$cli11" "$cli11"
order=$(ls "${GPUMAN_SOURCE_DIR}/cmake" 2>/dev/null | grep -c 'text-order' || true)
check "no text-order script" 0 "$order" ""
exit $fail
