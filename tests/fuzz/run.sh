#!/usr/bin/env bash
# Runs the libFuzzer targets built in a fuzz build directory (docs/testing.md "Fuzzing"):
#   tests/fuzz/run.sh [--build DIR] [--time SECONDS | --runs N] [--jobs J] [--max-len BYTES] [TARGET...]
# Each target starts from its committed corpus (tests/fuzz/corpus/TARGET, read only) and
# keeps what it finds in WORK/TARGET (default $GPUMAN_FUZZ_WORK or /tmp/gpuman-fuzz);
# crashers land in WORK/TARGET-crash-*. One target at a time, J processes each (default
# 1; --runs N is per process). Prints each target's executions; exits 1 when a target
# failed (a crash, a leak, a timeout or a failed FUZZ_CHECK).
set -euo pipefail
src="$(cd "$(dirname "$0")/../.." && pwd)"
build="$src/build-fuzz"
limit=(-max_total_time=30)
jobs=1
max_len=4096
targets=()
while (($#)); do
  case "$1" in
    --build) build="$(cd "$2" && pwd)"; shift 2 ;;
    --time) limit=(-max_total_time="$2"); shift 2 ;;
    --runs) limit=(-runs="$2"); shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --max-len) max_len="$2"; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if ((${#targets[@]} == 0)); then
  targets=(protocol visibility units config scenario kernel_log)
fi
work="${GPUMAN_FUZZ_WORK:-/tmp/gpuman-fuzz}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
# ASan records a stack for every allocation; that was a fifth of the fuzzers' time. A
# crasher is replayed by the suite's replay binary, which reports the full stacks.
export ASAN_OPTIONS="${ASAN_OPTIONS:-malloc_context_size=0}"
failed=0
for t in "${targets[@]}"; do
  bin="$build/tests/fuzz/fuzz_$t"
  [[ -x "$bin" ]] || { echo "fuzz: $bin not built (cmake --build $build --target gpuman_fuzzers)" >&2; exit 2; }
  mkdir -p "$work/$t" "$work/$t-logs"
  start=$(date +%s)
  # -jobs runs J processes one after another unless -workers says how many at once.
  args=("${limit[@]}" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$work/$t-crash-")
  if ((jobs > 1)); then args+=(-jobs="$jobs" -workers="$jobs"); fi
  rc=0
  (cd "$work/$t-logs" && nice -n 10 "$bin" "${args[@]}" "$work/$t" "$src/tests/fuzz/corpus/$t" \
     > "$work/$t-logs/main.log" 2>&1) || rc=$?
  execs=$(cat "$work/$t-logs"/*.log | sed -n 's/^stat::number_of_executed_units: *//p' | awk '{s+=$1} END {print s+0}')
  echo "fuzz $t: $execs executions in $(( $(date +%s) - start )) s, exit $rc"
  if ((rc != 0)); then
    failed=1
    grep -h -A30 "ERROR\|FUZZ_CHECK\|runtime error" "$work/$t-logs"/*.log | head -60 >&2 || true
  fi
done
exit $failed
