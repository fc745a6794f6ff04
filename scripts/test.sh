#!/usr/bin/env bash
# Runs gpuman's whole test suite: builds build/ if needed (scripts/setup.sh installs the
# packages), then every unit and end-to-end test through CTest.
# Usage: scripts/test.sh [extra ctest arguments, e.g. -L e2e or -R Status]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 300 "$@"
