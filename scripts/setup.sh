#!/usr/bin/env bash
# Sets up gpuman on a fresh Debian 12 machine: installs the Debian packages that building
# and running need (no test tools: scripts/test.sh adds those), builds the product only
# (gpuman, the stand-in NVML behind --simulate, the metrics module) into build/, and runs
# its main job, `gpuman status`. Without an NVIDIA driver the status comes from the
# simulated node that ships with gpuman, and says so.
# Usage: scripts/setup.sh [--no-run]      (as root, or with sudo available)
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake pkg-config
  libsqlite3-dev nlohmann-json3-dev libcli11-dev libfmt-dev libncurses-dev
  libcpp-httplib-dev libtomlplusplus-dev
)

source scripts/install_packages.sh
install_packages "${PACKAGES[@]}"

echo "==> building gpuman in build/"
# Tests OFF is set explicitly (a cache variable): re-running setup.sh after test.sh
# switches build/ back to the product only, and test.sh switches it on again.
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUMAN_BUILD_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)" --target gpuman

# The machine lease table (/run/gpuman/leases) is root's; any root gpuman command sets it
# up, so users can lease GPUs without a daemon (docs/state.md).
if [ "$(id -u)" -eq 0 ]; then build/gpuman leases >/dev/null || true; fi

if [ "${1:-}" = "--no-run" ]; then exit 0; fi

echo "==> gpuman status"
set +e
build/gpuman status
rc=$?
set -e
if [ "$rc" -eq 3 ]; then
  echo
  echo "==> no usable NVIDIA driver on this machine: showing the simulated 4x A100 node instead"
  build/gpuman --simulate a100-4 status
elif [ "$rc" -ne 0 ]; then
  exit "$rc"
fi
