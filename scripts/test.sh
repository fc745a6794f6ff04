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

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUMAN_BUILD_TESTS=ON >/dev/null
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 300 "$@"
