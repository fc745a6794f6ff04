#!/usr/bin/env bash
# Runs gpuman's tests (docs/testing.md). Installs the test-only Debian packages
# (scripts/setup.sh installs what building needs), configures a build directory with the
# tests on, builds, and runs CTest. Modes:
#   scripts/test.sh [CTEST ARGS]             build/: everything, every test (unit, e2e,
#                                            fuzz corpus replays, install), e.g. -L e2e, -R Status
#   scripts/test.sh --sanitize address [..]  build-asan/: ASan + UBSan over the tests of parsing:
#                                            label asan, fuzz replays ($ASAN_E2E with e2e_test built)
#   scripts/test.sh --sanitize thread [..]   build-tsan/: TSan, the daemon and store tests, $TSAN_E2E
#   scripts/test.sh --fuzz [SECONDS]         build-fuzz/ (clang): every libFuzzer target for
#                                            SECONDS each (default 30), from its corpus
# GPUMAN_SANITIZE=address|thread in the environment is the same as --sanitize. CTest
# arguments given after a sanitizer mode replace its default selection of tests.
set -euo pipefail
cd "$(dirname "$0")/.."

TEST_PACKAGES=(
  libgtest-dev libgmock-dev libbenchmark-dev
  zlib1g-dev  # e2e: decodes the PNG screenshot of `gpuman report --html`
  # test tools: `gpuman top` runs under tmux, /metrics is scraped by a real Prometheus,
  # `gpuman report --html` is rendered by headless Chromium
  tmux prometheus chromium fonts-dejavu-core
  # install tests: the .deb is checked by lintian, the man pages by man/groff, the units by
  # systemd-analyze
  lintian man-db groff-base systemd
  # `gpuman jupyter install-kernel` runs a real Jupyter kernel under its lease (tests/python)
  python3-ipykernel
  # `gpuman doctor` gives Debian's real, CPU-only PyTorch its verdict (tests/e2e/doctor_e2e_test.cc)
  python3-torch
  # the stock sqlite3 shell on the machine lease table (tests/e2e/lease_table_sqlite3_e2e_test.cc)
  sqlite3
  # fuzzing (tests/fuzz/): clang 14 and its libFuzzer runtime (a Recommends of clang-14)
  clang libclang-rt-14-dev
)

mode=normal
sanitize="${GPUMAN_SANITIZE:-}"
fuzz_seconds=30
case "${1:-}" in
  --sanitize) sanitize="${2:?--sanitize needs address or thread}"; shift 2 ;;
  --sanitize=*) sanitize="${1#--sanitize=}"; shift ;;
  --fuzz)
    mode=fuzz
    shift
    if [[ "${1:-}" =~ ^[0-9]+$ ]]; then fuzz_seconds="$1"; shift; fi
    ;;
esac
if [[ -n "$sanitize" ]]; then
  case "$sanitize" in
    address|asan) mode=asan ;;
    thread|tsan) mode=tsan ;;
    *) echo "scripts/test.sh: --sanitize takes address or thread, not '$sanitize'" >&2; exit 2 ;;
  esac
fi

source scripts/install_packages.sh
install_packages "${TEST_PACKAGES[@]}"

# The tests must leave the machine as they found it. /tmp's mode is checked because a daemon
# once changed it (to 0755: every other user's temporary files, and MariaDB under the Slurm
# tests, then failed with EACCES). A changed mode is restored and fails the run.
tmp_mode="$(stat -c %a /tmp)"
check_tmp_mode() {
  local rc=$? now
  now="$(stat -c %a /tmp)"
  if [[ "$now" != "$tmp_mode" ]]; then
    echo "test.sh: the tests changed /tmp's mode from $tmp_mode to $now (restored): the run fails" >&2
    chmod "$tmp_mode" /tmp 2>/dev/null || true
    rc=1
  fi
  exit "$rc"
}
trap check_tmp_mode EXIT

jobs="$(nproc)"

# The e2e suites each sanitizer stage runs beside its unit tests (tests/CMakeLists.txt lists
# those, labels asan and tsan; docs/testing.md "What CI runs" says why these): input parsed
# through the real binary, the daemon's protocol and its two-user rules, concurrent leases,
# and the threaded parts (the collector, the metrics server, top's sampler).
ASAN_E2E='^(BadInputE2E|DaemonE2E|TwoUsersE2E|AuthorityE2E|MetricsE2E|TopE2E)\.'
TSAN_E2E='^(DaemonE2E|MetricsE2E|TopE2E)\.'

# A sanitizer run's reports: one file per reporting process (log_path=DIR/KIND, with the
# executable's name and pid appended), in a directory every test user may write to.
sanitizer_logs() {
  local dir="$PWD/$1/sanitizer-logs"
  rm -rf "$dir"
  mkdir -p "$dir"
  chmod 1777 "$dir"
  echo "$dir"
}
# Prints every report left in DIR and fails when there is one.
check_sanitizer_logs() {
  local dir="$1" f found=0
  for f in "$dir"/*; do
    [[ -e "$f" ]] || continue
    found=1
    echo "==> sanitizer report: $f" >&2
    head -c 20000 "$f" >&2
  done
  if ((found)); then
    echo "test.sh: sanitizer reports in $dir (above): the run fails" >&2
    return 1
  fi
  echo "test.sh: no sanitizer report in $dir"
}
case "$mode" in
  normal)
    # Slurm (ctest label `slurm`, tests/e2e/slurm_e2e_test.cc): the tests start a real
    # single-node Slurm with tests/slurm/slurm-single-node.sh, which installs slurm-wlm and munge
    # (and, for accounting, slurmdbd and mariadb) from Debian itself (root only; the tests skip
    # otherwise). Start and stop it once here so that the first install is not spent inside a
    # test's timeout.
    if [[ $(id -u) == 0 ]]; then
      SLURM_FAKE_GPUS=8 SLURM_NODE_CPUS=8 SLURM_CONSTRAIN_DEVICES=1 SLURM_ACCOUNTING=1 tests/slurm/slurm-single-node.sh start >/dev/null &&
        tests/slurm/slurm-single-node.sh stop 2>/dev/null ||
        echo "test.sh: warning: the Slurm recipe failed; the slurm-labelled tests will fail" >&2
    fi
    cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUMAN_BUILD_TESTS=ON >/dev/null
    cmake --build build -j"$jobs"
    ctest --test-dir build --output-on-failure -j"$jobs" --timeout 300 "$@"
    ;;

  asan)
    # One ASan + UBSan build for the tests of parsing (label asan, the fuzz corpus replays;
    # $ASAN_E2E too once e2e_test is built there): -O1 keeps the build and the run fast enough; undefined
    # behaviour aborts (-fno-sanitize-recover, CMakeLists.txt); float-cast-overflow is not
    # part of gcc's "undefined". Only what those tests run is built (target asan_binaries).
    cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
      -DGPUMAN_BUILD_TESTS=ON "-DGPUMAN_SANITIZE=address,undefined,float-cast-overflow" >/dev/null
    cmake --build build-asan -j"$jobs" --target asan_binaries
    logs="$(sanitizer_logs build-asan)"
    # LeakSanitizer checks every process that exits: the test binaries and every gpuman the
    # e2e tests start (clients, daemons, supervisors). Reports go to files in $logs, so
    # that a report of a process whose output nobody reads (a supervisor's stderr is
    # /dev/null, a daemon's is often ignored) still fails the run.
    export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:strict_string_checks=1:log_path=$logs/asan:log_exe_name=1"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$logs/ubsan:log_exe_name=1"
    export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
    # Several times slower than the release build: longer per-test limits.
    rc=0
    if (($#)); then
      ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout 900 "$@" || rc=$?
    else
      ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout 900 -L '^(asan|fuzz)$' || rc=$?
      # The e2e suites only where e2e_test was built under ASan (not by default: CI's budget).
      if [[ -x build-asan/tests/e2e_test ]]; then
        ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout 900 -L '^e2e$' -R "$ASAN_E2E" || rc=$?
      fi
    fi
    check_sanitizer_logs "$logs" || rc=1
    exit "$rc"
    ;;

  tsan)
    # Only what the threaded code's tests need: the product, the daemon and store tests
    # (label `tsan`) and the e2e suites of the threaded parts ($TSAN_E2E). CTest arguments
    # replace that selection.
    cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
      -DGPUMAN_BUILD_TESTS=ON -DGPUMAN_SANITIZE=thread >/dev/null
    cmake --build build-tsan -j"$jobs" --target tsan_binaries
    logs="$(sanitizer_logs build-tsan)"
    # Third-party noise is suppressed in tests/tsan.supp (each entry says why); a report
    # fails the process (exit 66) and is kept in $logs, which fails the run.
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp:log_path=$logs/tsan:log_exe_name=1"
    rc=0
    if (($#)); then
      ctest --test-dir build-tsan --output-on-failure -j"$jobs" --timeout 900 "$@" || rc=$?
    else
      ctest --test-dir build-tsan --output-on-failure -j"$jobs" --timeout 900 -L '^tsan$' || rc=$?
      ctest --test-dir build-tsan --output-on-failure -j"$jobs" --timeout 900 -L '^e2e$' -R "$TSAN_E2E" || rc=$?
    fi
    check_sanitizer_logs "$logs" || rc=1
    exit "$rc"
    ;;

  fuzz)
    if ! command -v clang++ >/dev/null; then
      echo "scripts/test.sh --fuzz: clang++ not found; fuzzers skipped" >&2
      exit 0
    fi
    cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DGPUMAN_BUILD_TESTS=OFF -DGPUMAN_FUZZ=ON >/dev/null
    cmake --build build-fuzz -j"$jobs" --target gpuman_fuzzers
    tests/fuzz/run.sh --build build-fuzz --time "$fuzz_seconds"
    ;;
esac
