#!/usr/bin/env bash
# The installed gpuman, away from its checkout (docs/design.md "Installed layout"):
#   (a) `cmake --install` into a temporary prefix, copied elsewhere, run with the source and
#       build trees hidden (a private mount namespace puts an empty tmpfs over them):
#       --simulate status, the daemon's metrics module, socket activation, man -l;
#   (b) the .deb (cpack): control fields, file list, no build-tree path in any file,
#       extracted with `dpkg-deb -x` into a throwaway root and run there; its postinst and
#       tmpfiles.d snippet create the state directories with docs/state.md's modes (inside
#       the namespace, over tmpfs /var/lib and /run); lintian reports no error;
#   (c) `systemd-analyze verify` on the shipped units.
# Both (a) and (b) check that the units name the install prefix (ExecStart) and that what
# the installed texts point to is installed.
# Needs root and unshare (CI runs as root); exits 77 (skipped) without them. Tools that are
# missing (cpack/dpkg-deb, lintian, systemd-analyze, systemd-socket-activate, man) skip
# only their own check, with a note.
set -euo pipefail
B=${GPUMAN_BUILD_DIR:?}
S=${GPUMAN_SOURCE_DIR:?}
fail() { echo "FAIL: $*" >&2; exit 1; }
note() { echo "note: $*"; }

if [ "$(id -u)" -ne 0 ]; then echo "skipped: needs root (private mount namespace)"; exit 77; fi
if ! unshare -m --propagation private true 2>/dev/null; then echo "skipped: unshare -m not permitted"; exit 77; fi

T=$(mktemp -d /tmp/gpuman-install-test.XXXXXX)
trap 'rm -rf "$T"' EXIT
chmod 0755 "$T"

# Runs "$@" with the checkout hidden: empty tmpfs over the source and build trees, so
# nothing there can be found. Asserts the hiding worked first.
hidden() {
  unshare -m --propagation private env HIDE_S="$S" HIDE_B="$B" bash -c '
    set -e
    mount -t tmpfs none "$HIDE_S"
    case "$HIDE_B" in "$HIDE_S"/*) ;; *) mount -t tmpfs none "$HIDE_B" ;; esac
    [ -z "$(ls -A "$HIDE_S")" ] || { echo "FAIL: source tree still visible" >&2; exit 1; }
    [ ! -e "$HIDE_B/gpuman" ] || { echo "FAIL: build tree still visible" >&2; exit 1; }
    exec "$@"' hidden "$@"
}

# A clean environment: no config, a private lease table, nothing pointing at the build.
mkdir -m 0700 "$T/leases" "$T/home"
E=(env -i PATH=/usr/bin:/bin HOME="$T/home" XDG_CONFIG_HOME="$T/home/.config" GPUMAN_LEASE_DIR="$T/leases")

check_status() {  # $1 = the gpuman binary
  local out
  out=$(hidden "${E[@]}" "$1" --simulate a100-4 status 2>&1) || fail "$1 --simulate a100-4 status: $out"
  grep -q '^\[SIMULATED: a100-4\]' <<<"$out" || fail "no simulated status from $1: $out"
  grep -q 'A100-SXM4-80GB' <<<"$out" || fail "no GPUs in the status of $1: $out"
}

# ---- (a) cmake --install ------------------------------------------------------------
cmake --install "$B" --prefix "$T/prefix" >/dev/null
for f in bin/gpuman lib/gpuman/gpuman-metrics-http.so lib/gpuman/gpuman-tui-curses.so lib/gpuman/sim/libnvidia-ml.so.1 \
         share/gpuman/scenarios/a100-4.json lib/systemd/system/gpuman.service \
         lib/systemd/system/gpuman.socket lib/systemd/system/gpuman-leases.service \
         lib/tmpfiles.d/gpuman.conf share/doc/gpuman/config.toml.example share/doc/gpuman/enforce.md; do
  [ -e "$T/prefix/$f" ] || fail "cmake --install did not install $f"
done
[ ! -e "$T/prefix/lib/gpuman/sim-legacy" ] || fail "the test-only legacy stand-in was installed"
# The units name the prefix given to `cmake --install` (written at install time, not the
# configured /usr/local), and what the installed texts point to lies in PREFIX/share/doc/gpuman:
# no "docs/X.md" of the sources, no @VAR@ left, and every document named exists.
grep -qx "ExecStart=$T/prefix/bin/gpuman daemon" "$T/prefix/lib/systemd/system/gpuman.service" ||
  fail "gpuman.service: $(grep ExecStart "$T/prefix/lib/systemd/system/gpuman.service")"
grep -qx "ExecStart=$T/prefix/bin/gpuman leases" "$T/prefix/lib/systemd/system/gpuman-leases.service" ||
  fail "gpuman-leases.service: $(grep ExecStart "$T/prefix/lib/systemd/system/gpuman-leases.service")"
texts=(lib/systemd/system/gpuman.service lib/systemd/system/gpuman-leases.service lib/systemd/system/gpuman.socket
       lib/tmpfiles.d/gpuman.conf share/doc/gpuman/config.toml.example)
for f in "${texts[@]}"; do
  if grep -n -e '[ (`"]docs/' -e '@[A-Z_]*@' "$T/prefix/$f"; then fail "installed $f names the sources' docs/ or an unsubstituted @VAR@ (above)"; fi
done
named_docs=$(cd "$T/prefix" && grep -oh "$T/prefix/share/doc/gpuman/[a-z_]*\.[a-z]*" "${texts[@]}" | sort -u)
[ -n "$named_docs" ] || fail "the installed units and config name no installed document"
for doc in $named_docs; do [ -e "$doc" ] || fail "an installed text names $doc, which was not installed"; done
# The documentation is installed, and the man pages send readers there: the full reference
# is PREFIX/share/doc/gpuman/cli.md (not "docs/cli.md in the sources"), no page names docs/,
# and every document a page names was installed. (Roff writes '-' in paths as '\-'.)
for f in cli.md install.md state.md; do [ -e "$T/prefix/share/doc/gpuman/$f" ] || fail "share/doc/gpuman/$f not installed"; done
roff_doc_dir="${T//-/\\-}/prefix/share/doc/gpuman"
pages=("$T/prefix/share/man/man1/"gpuman*.1.gz)
[ "${#pages[@]}" -gt 20 ] || fail "only ${#pages[@]} man pages installed"
for page in "${pages[@]}"; do
  text=$(zcat "$page")
  grep -qF "The full reference is \\fI$roff_doc_dir/cli.md\\fR." <<<"$text" || fail "$page does not name $T/prefix/share/doc/gpuman/cli.md"
  if grep -n -e 'docs/' -e 'gpuman sources' <<<"$text"; then fail "$page names the sources (above)"; fi
done
named_docs=$(zcat "${pages[@]}" | grep -o "share/doc/gpuman/[a-z_]*\.md" | sort -u)
[ "$(wc -l <<<"$named_docs")" -gt 3 ] || fail "the man pages name few documents: $named_docs"
for doc in $named_docs; do [ -e "$T/prefix/$doc" ] || fail "a man page names $doc, which was not installed"; done
# The Python package (docs/python.md): where Debian's python3 looks under a prefix other
# than /usr, and it finds the installed binary with the checkout hidden.
pyver=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
pydir="$T/prefix/lib/python$pyver/dist-packages"
[ -e "$pydir/gpuman/__init__.py" ] || fail "cmake --install did not install the Python package in $pydir"
grep -q "^_INSTALLED_BINARY = \"$T/prefix/bin/gpuman\"" "$pydir/gpuman/__init__.py" || fail "the Python package does not name the installed binary"
out=$(hidden "${E[@]}" GPUMAN_SIMULATE=a100-4 PYTHONPATH="$pydir" python3 -c 'import gpuman; print(len(gpuman.status()["gpus"]))' 2>&1) ||
  fail "the installed Python package: $out"
[ "$out" = 4 ] || fail "the installed Python package saw $out GPUs of a100-4"
# Reproducible and relocatable: no installed file names the source or build tree (issue 22;
# -ffile-prefix-map, no compiled-in scenario folder), debug info included. The documents
# (*.md) are text written by people, free to name any path (a clone in /tmp/ci).
if grep -rl --exclude="*.md" -e "$B" -e "$S" "$T/prefix"; then fail "an installed file names $B or $S (above)"; fi
# Moved after installing: the binary finds its pieces relative to itself, not the prefix.
mv "$T/prefix" "$T/moved"
G="$T/moved/bin/gpuman"
check_status "$G"
scenarios=$(hidden "${E[@]}" "$G" scenarios 2>&1) || fail "gpuman scenarios: $scenarios"
# Help names the documents where this gpuman's prefix has them, found from its own path.
out=$(hidden "${E[@]}" "$G" --help 2>&1) || fail "gpuman --help: $out"
grep -qF "Node-side tools for Slurm admins ($T/moved/share/doc/gpuman/slurm.md)" <<<"$out" ||
  fail "gpuman --help does not name the moved prefix's slurm.md: $out"
grep -qx 'h100-8' <<<"$scenarios" || fail "installed scenarios not listed: $scenarios"

# The daemon finds its metrics module in ../lib/gpuman.
hidden "${E[@]}" timeout 20 "$G" --simulate a100-4 daemon --socket "$T/d.sock" --state-dir "$T/state" \
  --metrics 127.0.0.1:0 >"$T/daemon.log" 2>&1 &
dpid=$!
for _ in $(seq 150); do grep -q 'metrics at http://127.0.0.1:' "$T/daemon.log" && break; sleep 0.1; done
kill "$dpid" 2>/dev/null || true; wait "$dpid" 2>/dev/null || true
grep -q 'metrics at http://127.0.0.1:[0-9]*/metrics' "$T/daemon.log" ||
  fail "the installed daemon did not serve metrics: $(cat "$T/daemon.log")"

# The libraries only the modules link are Recommends of the .deb: without one, the command
# that loads the module says so in one line naming the library and its package, and the
# daemon keeps serving without /metrics. A copy of the prefix whose modules name a library
# that does not exist (same length, patched in the ELF string table) stands for a machine
# without them.
cp -a "$T/moved" "$T/nolibs"
python3 - "$T/nolibs/lib/gpuman" <<'PY' || fail "patching the modules' library names"
import sys
for module, lib in (("gpuman-metrics-http.so", b"libcpp-httplib.so.0.11"), ("gpuman-tui-curses.so", b"libncursesw.so.6")):
    path = sys.argv[1] + "/" + module
    data = open(path, "rb").read()
    assert data.count(lib + b"\0") == 1, (path, lib, data.count(lib + b"\0"))
    open(path, "wb").write(data.replace(lib + b"\0", b"lbx" + lib[3:] + b"\0"))
PY
N="$T/nolibs/bin/gpuman"
hidden "${E[@]}" timeout 30 "$N" --simulate a100-4 daemon --socket "$T/nolibs.sock" --state-dir "$T/nolibs-state" \
  --metrics 127.0.0.1:0 >"$T/nolibs.log" 2>&1 &
npid=$!
for _ in $(seq 150); do [ -S "$T/nolibs.sock" ] && break; sleep 0.1; done
out=$(hidden "${E[@]}" GPUMAN_SOCKET="$T/nolibs.sock" "$N" queue 2>&1) || fail "the daemon without cpp-httplib does not serve: $out; $(cat "$T/nolibs.log")"
kill "$npid" 2>/dev/null || true; wait "$npid" 2>/dev/null || true
grep -qx 'gpuman daemon: the metrics endpoint needs lbxcpp-httplib.so.0.11, which is not installed (Debian package libcpp-httplib0.11: apt install libcpp-httplib0.11); serving no /metrics, everything else runs' \
  "$T/nolibs.log" || fail "the daemon without cpp-httplib: $(cat "$T/nolibs.log")"
! grep -q 'metrics at' "$T/nolibs.log" || fail "the daemon without cpp-httplib claims to serve metrics"
# `top` in a terminal (script(1) gives it one) without ncurses: one line, exit 1.
rc=0
out=$(hidden "${E[@]}" TERM=xterm script -qec "$N --simulate a100-4 top" /dev/null 2>&1) || rc=$?
[ "$rc" -eq 1 ] || fail "top without ncurses exited $rc: $out"
grep -q '^gpuman: error: top needs lbxncursesw.so.6, which is not installed (Debian package libncursesw6: apt install libncursesw6)$' <<<"${out//$'\r'/}" ||
  fail "top without ncurses: $out"
out=$(hidden "${E[@]}" "$N" --simulate a100-4 top --once 2>&1) || fail "top --once without ncurses: $out"

# Socket activation: the daemon serves the listening socket it is handed (LISTEN_FDS)
# and does not bind its own --socket path.
if command -v systemd-socket-activate >/dev/null; then
  mkdir -m 0700 "$T/act-state"
  hidden "${E[@]}" timeout 30 systemd-socket-activate -l "$T/act.sock" \
    "$G" --simulate a100-4 daemon --socket "$T/own.sock" --state-dir "$T/act-state" >"$T/act.log" 2>&1 &
  apid=$!
  for _ in $(seq 50); do [ -S "$T/act.sock" ] && break; sleep 0.1; done
  out=$(hidden "${E[@]}" GPUMAN_SOCKET="$T/act.sock" "$G" queue 2>&1) ||
    fail "gpuman queue through the activated socket: $out; daemon: $(cat "$T/act.log")"
  [ ! -e "$T/own.sock" ] || fail "the socket-activated daemon bound its own socket too"
  kill "$apid" 2>/dev/null || true; wait "$apid" 2>/dev/null || true
else
  note "systemd-socket-activate missing: socket activation not checked"
fi

# An installed man page (cmake/man.cmake) renders without the checkout.
page=$(find "$T/moved/share/man" -name 'gpuman.1*' 2>/dev/null | head -1 || true)
if [ -n "$page" ] && command -v man >/dev/null; then
  hidden "${E[@]}" MANWIDTH=80 man -l "$page" 2>&1 | grep -q 'gpuman' || fail "man -l $page shows nothing"
else
  note "no installed man page (or no man): man -l not checked"
fi

# ---- (b) the .deb --------------------------------------------------------------------
if command -v cpack >/dev/null && command -v dpkg-deb >/dev/null; then
  (cd "$B" && cpack -G DEB -B "$T/pkg" >"$T/cpack.log" 2>&1) || fail "cpack: $(tail -5 "$T/cpack.log")"
  deb=$(ls "$T"/pkg/gpuman_*_amd64.deb) || fail "no gpuman_<version>_amd64.deb from cpack"
  [ "$(dpkg-deb -f "$deb" Package)" = gpuman ] || fail "Package is not gpuman"
  depends=$(dpkg-deb -f "$deb" Depends)
  for lib in libc6 libstdc++6 libsqlite3-0; do
    grep -q "\b$lib\b" <<<"$depends" || fail "Depends lacks $lib: $depends"
  done
  ! grep -q -- '-dev\b' <<<"$depends" || fail "Depends names a -dev package: $depends"
  # The optional modules' libraries: Recommends, not Depends (cmake/deb_depends.cmake).
  recommends=$(dpkg-deb -f "$deb" Recommends)
  for lib in libcpp-httplib0.11 libncursesw6; do
    ! grep -q "\b$lib\b" <<<"$depends" || fail "Depends names $lib, which only an optional module needs: $depends"
    grep -q "\b$lib\b" <<<"$recommends" || fail "Recommends lacks $lib: $recommends"
  done
  files=$(dpkg-deb -c "$deb")
  for f in ./usr/bin/gpuman ./usr/lib/gpuman/gpuman-metrics-http.so ./usr/lib/gpuman/gpuman-tui-curses.so ./usr/lib/gpuman/sim/libnvidia-ml.so.1 \
           ./usr/share/gpuman/scenarios/a100-4.json ./usr/lib/systemd/system/gpuman.socket \
           ./usr/lib/systemd/system/gpuman.service ./usr/lib/tmpfiles.d/gpuman.conf \
           ./usr/share/doc/gpuman/copyright ./usr/share/doc/gpuman/enforce.md \
           ./usr/lib/python3/dist-packages/gpuman/__init__.py ./usr/share/doc/gpuman/python.md; do
    grep -q " $f\$" <<<"$files" || fail "the .deb lacks $f"
  done
  mkdir "$T/root" "$T/control"
  dpkg-deb -x "$deb" "$T/root"
  dpkg-deb -e "$deb" "$T/control"
  if grep -rl --exclude="*.md" -e "$B" -e "$S" "$T/root" "$T/control"; then fail "build-tree path $B or source path $S inside the package"; fi
  check_status "$T/root/usr/bin/gpuman"
  grep -qx 'ExecStart=/usr/bin/gpuman daemon' "$T/root/usr/lib/systemd/system/gpuman.service" || fail "the .deb's gpuman.service ExecStart"
  grep -qx 'ExecStart=/usr/bin/gpuman leases' "$T/root/usr/lib/systemd/system/gpuman-leases.service" || fail "the .deb's gpuman-leases.service ExecStart"
  grep -q '/usr/share/doc/gpuman/install\.md' "$T/root/usr/lib/systemd/system/gpuman.service" || fail "the .deb's gpuman.service does not point to /usr/share/doc/gpuman"
  for f in cli.md install.md; do [ -e "$T/root/usr/share/doc/gpuman/$f" ] || fail "the .deb lacks /usr/share/doc/gpuman/$f"; done
  zcat "$T/root/usr/share/man/man1/gpuman-run.1.gz" | grep -qF 'The full reference is \fI/usr/share/doc/gpuman/cli.md\fR.' ||
    fail "the .deb's gpuman-run(1) does not name /usr/share/doc/gpuman/cli.md"

  # postinst + tmpfiles.d, over empty /var/lib and /run in the namespace.
  modes=$(unshare -m --propagation private env R="$T/root" C="$T/control" bash -c '
    set -e
    mount -t tmpfs none /var/lib; mount -t tmpfs none /run; mount -t tmpfs none /etc/tmpfiles.d
    cp "$R/usr/lib/tmpfiles.d/gpuman.conf" /etc/tmpfiles.d/
    sh "$C/postinst" configure
    stat -c "%a %U %n" /var/lib/gpuman /run/gpuman /run/gpuman/leases') || fail "postinst: $modes"
  [ "$modes" = "711 root /var/lib/gpuman
755 root /run/gpuman
755 root /run/gpuman/leases" ] || fail "state directories after postinst: $modes"

  # postinst enables gpuman.socket (issue 23: the daemon is the authority from boot), and an
  # upgrade keeps an admin's `disable`; remove masks it, purge forgets it. Over empty unit
  # directories in the namespace, with the package's units in place.
  if command -v deb-systemd-helper >/dev/null; then
    # (dpkg names the package to its scripts; deb-systemd-helper does nothing without it.)
    enabled=$(unshare -m --propagation private env R="$T/root" C="$T/control" DPKG_MAINTSCRIPT_PACKAGE=gpuman bash -c '
      set -e
      for d in /var/lib /run /etc/systemd/system /usr/lib/systemd/system; do mount -t tmpfs none "$d"; done
      cp "$R"/usr/lib/systemd/system/gpuman.* /usr/lib/systemd/system/
      sh "$C/postinst" configure
      echo "install: $(readlink /etc/systemd/system/sockets.target.wants/gpuman.socket || echo none)"
      deb-systemd-helper disable gpuman.socket
      sh "$C/postinst" configure 2.0
      echo "upgrade after disable: $(readlink /etc/systemd/system/sockets.target.wants/gpuman.socket || echo none)"
      sh "$C/prerm" remove; sh "$C/postrm" remove
      echo "remove: $(readlink /etc/systemd/system/gpuman.socket || echo none)"
      sh "$C/postrm" purge
      echo "purge: $(readlink /etc/systemd/system/gpuman.socket || echo none)"') || fail "postinst (units): $enabled"
    [ "$enabled" = "install: /lib/systemd/system/gpuman.socket
upgrade after disable: none
remove: /dev/null
purge: none" ] || fail "gpuman.socket enablement: $enabled"
  else
    note "deb-systemd-helper missing: the unit enablement not checked"
  fi

  if command -v lintian >/dev/null; then
    lintian --no-tag-display-limit "$deb" >"$T/lintian.log" 2>&1 || true
    if grep '^E:' "$T/lintian.log"; then fail "lintian errors"; fi
  else
    note "lintian missing: not run"
  fi
else
  note "cpack or dpkg-deb missing: the .deb not checked"
fi

# ---- (c) the units -------------------------------------------------------------------
U="$T/moved/lib/systemd/system"
grep -qx 'ListenStream=/run/gpuman/gpuman.sock' "$U/gpuman.socket" || fail "gpuman.socket ListenStream"
grep -qx 'SocketMode=0666' "$U/gpuman.socket" || fail "gpuman.socket SocketMode"
if command -v systemd-analyze >/dev/null && [ -e /usr/lib/systemd/system/sysinit.target ]; then
  mkdir "$T/units"
  cp "$U"/gpuman.service "$U"/gpuman.socket "$U"/gpuman-leases.service "$T/units/"
  # The prefix was moved after installing: point ExecStart at where the binary is now.
  sed -i "s|ExecStart=$T/prefix/bin/gpuman|ExecStart=$G|" "$T/units"/*.service
  (cd "$T/units" && SYSTEMD_UNIT_PATH="$T/units:" systemd-analyze verify --man=no \
     "$T/units/gpuman.socket" "$T/units/gpuman.service" "$T/units/gpuman-leases.service") ||
    fail "systemd-analyze verify"
else
  note "systemd-analyze (or systemd's units) missing: units not verified"
fi
echo "install test: ok"
