#!/usr/bin/env bash
# Builds the Debian package build/gpuman_<version>_amd64.deb (CPack, CMakeLists.txt).
set -euo pipefail; cd "$(dirname "$0")/.."; cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build build -j"$(nproc)" --target gpuman && (cd build && cpack -G DEB)
