#!/usr/bin/env bash
# Builds the Debian package build/gpuman_<version>_amd64.deb (CPack, CMakeLists.txt): builds
# gpuman, its pieces and the man pages, then `cpack -G DEB` in build/.
set -euo pipefail; cd "$(dirname "$0")/.."; cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build build -j"$(nproc)" --target gpuman gpuman_man && (cd build && cpack -G DEB)
