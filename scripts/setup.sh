#!/usr/bin/env bash
# Sets up gpuman on a fresh Debian 12 machine: installs the Debian packages it needs,
# builds it into build/, and runs its main job, `gpuman status`. Without an NVIDIA driver
# the status comes from the simulated node that ships with gpuman, and says so.
# Usage: scripts/setup.sh [--no-run]      (as root, or with sudo available)
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake pkg-config
  libsqlite3-dev nlohmann-json3-dev libcli11-dev libfmt-dev libncurses-dev
  libcpp-httplib-dev libtomlplusplus-dev
  libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev
  # test tools: `gpuman top` runs under tmux, /metrics is scraped by a real Prometheus,
  # `gpuman report --html` is rendered by headless Chromium
  tmux prometheus chromium fonts-dejavu-core lintian
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "==> installing Debian packages: ${missing[*]}"
  SUDO=()
  if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); fi
  "${SUDO[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

echo "==> building gpuman in build/"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"

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
