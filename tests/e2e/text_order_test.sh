#!/bin/bash
# The start-up code sits together at the start of gpuman's text (cmake/text-order.ld,
# docs/design.md "Start-up"): when the build asked for it, the binary has the section, the
# functions every command runs are inside it, and it is a small part of the text.
# Skipped (77) in builds that do not order the text (sanitizers, clang).
set -euo pipefail
bin=${GPUMAN_BIN:?}
cache=${GPUMAN_BUILD_DIR:?}/CMakeCache.txt
fail() { echo "FAIL: $*" >&2; exit 1; }

hot=$(readelf -SW "$bin" | awk '$2 == ".text.gpuman_hot" {print $4, $6}')
if [ -z "$hot" ]; then
  if grep -q '^GPUMAN_TEXT_ORDER:BOOL=ON' "$cache"; then
    fail "GPUMAN_TEXT_ORDER is on but $bin has no .text.gpuman_hot section"
  fi
  echo "skip: this build does not order the text"
  exit 77
fi
read -r hot_addr hot_size <<<"$hot"
text_size=$(readelf -SW "$bin" | awk '$2 == ".text" {print $6}')
start=$((16#$hot_addr))
end=$((start + 16#$hot_size))
(( 16#$hot_size * 3 < 16#$hot_size + 16#$text_size )) ||
  fail "the hot section is not a small part of the code (0x$hot_size bytes, the rest 0x$text_size)"

inside() {  # inside MANGLED_NAME: the function's address lies in the hot section
  local addr
  addr=$(nm "$bin" | awk -v s="$1" '$3 == s && !f {print $1; f = 1}')
  [ -n "$addr" ] || fail "$1 is not in $bin"
  (( 16#$addr >= start && 16#$addr < end )) || fail "$1 (0x$addr) is outside the hot section"
}
inside _ZN6gpuman3cli4MainEiPPc  # gpuman::cli::Main, every command
first() { nm "$bin" | awk -v p="$1" 'index($3, p) == 1 && !f {print $3; f = 1}'; }
inside "$(first _ZN6gpuman6render14StatusJsonText)"  # status --json
inside "$(first _ZN6gpuman4nvml11NvmlLibrary4Load)"  # loading NVML
echo "ok: start-up code in 0x$hot_size bytes, the rest of the code in 0x$text_size"
