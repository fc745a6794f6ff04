#!/usr/bin/env bash
# Runs gpuman's whole test suite. Installs the test-only Debian packages (scripts/setup.sh
# installs what building needs), configures build/ with the tests on, builds everything,
# then runs every unit and end-to-end test through CTest.
# Usage: scripts/test.sh [extra ctest arguments, e.g. -L e2e or -R Status]
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
)

source scripts/install_packages.sh
install_packages "${TEST_PACKAGES[@]}"

# Slurm (ctest label `slurm`, tests/e2e/slurm_e2e_test.cc): the tests start a real
# single-node Slurm with tests/slurm/slurm-single-node.sh, which installs slurm-wlm and munge
# from Debian itself (root only; the tests skip otherwise). Start and stop it once here so
# that the first install is not spent inside a test's timeout.
if [[ $(id -u) == 0 ]]; then
  SLURM_FAKE_GPUS=8 SLURM_NODE_CPUS=8 SLURM_CONSTRAIN_DEVICES=1 tests/slurm/slurm-single-node.sh start >/dev/null &&
    tests/slurm/slurm-single-node.sh stop 2>/dev/null ||
    echo "test.sh: warning: the Slurm recipe failed; the slurm-labelled tests will fail" >&2
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUMAN_BUILD_TESTS=ON >/dev/null
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 300 "$@"
