#!/usr/bin/env bash
# Builds the Debian package BUILD_DIR/gpuman_<version>_amd64.deb (CPack, CMakeLists.txt):
# builds gpuman, its pieces and the man pages in BUILD_DIR, then `cpack -G DEB` there.
# Usage: scripts/package.sh [BUILD_DIR]        (default: build-package/ in the checkout)
# A BUILD_DIR that is configured already (build/, say) is used as it is: its options (tests,
# ccache, the build type) are left alone. A new one is configured for the product: release
# build with debug info, no tests. A sanitizer or fuzzing build is refused: its binaries
# need the sanitizer runtimes, which the package does not depend on.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$(realpath -m "${1:-$root/build-package}")"  # relative to where it was run from
if [ -e "$dir/CMakeCache.txt" ]; then
  if grep -Eq '^GPUMAN_(SANITIZE:STRING=.+|FUZZ:BOOL=(ON|1|TRUE))$' "$dir/CMakeCache.txt"; then
    echo "scripts/package.sh: $dir is a sanitizer or fuzzing build; package from a build without them" \
         "(scripts/package.sh with no argument makes build-package/)" >&2
    exit 2
  fi
else
  cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUMAN_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$dir" -j"$(nproc)" --target gpuman gpuman_man
(cd "$dir" && cpack -G DEB)
