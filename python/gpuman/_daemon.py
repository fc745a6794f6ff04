"""The daemon's protocol, just enough to take a plain lease and to release one natively
(docs/protocol.md, docs/python.md "Costs").

Frames are a 4-byte big-endian length and one JSON object; the first request is
``hello``. The socket is found and trusted as the CLI does ("Which daemon a client
trusts"): its directory and the socket owned by root or by us, the directory writable by
nobody else, no symbolic links, and the listening process's SO_PEERCRED uid root or us
(root trusts only root). Anything unexpected returns None and the caller runs the CLI.
"""

import os
import stat

_SYSTEM_SOCKET = "/run/gpuman/gpuman.sock"
_MAX_FRAME = 1 << 20


def _trusted_path(path):
    """True when the socket at ``path`` passes the file checks (rules 1 and 2)."""
    uid = os.getuid()
    ok_uids = (0,) if uid == 0 else (0, uid)
    d = os.path.dirname(path) or "."
    try:
        ds = os.lstat(d)
        ss = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(ds.st_mode) or ds.st_uid not in ok_uids:
        return False
    if ds.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return False
    if not stat.S_ISSOCK(ss.st_mode) or ss.st_uid not in ok_uids:
        return False
    return True


def socket_path():
    """The daemon socket the CLI would use, or None when no daemon is expected.

    A path that is expected but fails the trust checks also returns None: the CLI is then
    run, and it refuses with its own line."""
    env = os.environ.get("GPUMAN_SOCKET")
    if env:
        return env
    uid = os.getuid()
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    user = os.path.join(xdg, "gpuman", "gpuman.sock") if xdg else "/tmp/gpuman-%d/gpuman.sock" % uid
    if uid != 0 and os.path.lexists(user) and _trusted_path(user):
        return user
    if os.path.lexists(_SYSTEM_SOCKET):
        return _SYSTEM_SOCKET
    return None


class _Conn(object):
    def __init__(self, path, timeout=5.0):
        import socket
        import struct
        self._struct = struct
        self._json = __import__("json")
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        try:
            self.s.connect(path)
            cred = self.s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            _pid, peer_uid, _gid = struct.unpack("3i", cred)
            uid = os.getuid()
            if peer_uid != 0 and (uid == 0 or peer_uid != uid):
                raise OSError("untrusted daemon (uid %d)" % peer_uid)
        except BaseException:
            self.s.close()
            raise
        self.next_id = 1

    def close(self):
        self.s.close()

    def _recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.s.recv(n - len(buf))
            if not chunk:
                raise OSError("the daemon closed the connection")
            buf += chunk
        return bytes(buf)

    def call(self, op, args):
        rid = self.next_id
        self.next_id += 1
        body = self._json.dumps({"v": 1, "id": rid, "op": op, "args": args},
                                separators=(",", ":")).encode("utf-8")
        self.s.sendall(self._struct.pack(">I", len(body)) + body)
        (n,) = self._struct.unpack(">I", self._recv_exact(4))
        if n == 0 or n > _MAX_FRAME:
            raise OSError("bad frame length %d" % n)
        reply = self._json.loads(self._recv_exact(n).decode("utf-8"))
        if not isinstance(reply, dict) or reply.get("id") != rid:
            raise OSError("unexpected reply")
        return reply


def _greeted():
    """A connection to the trusted daemon that said hello to us as our own uid, or None (no
    daemon, not trusted, or any failure: the caller runs the CLI)."""
    path = socket_path()
    if path is None or not _trusted_path(path):
        return None
    try:
        conn = _Conn(path)
    except Exception:
        return None
    try:
        hello = conn.call("hello", {"client": "gpuman-python", "protocol": 1})
        if hello.get("ok") and hello.get("result", {}).get("uid") == os.getuid():
            return conn
    except Exception:
        pass
    conn.close()
    return None


def try_release(lease_id):
    """Releases through the daemon. Returns "ok", "not_found", or None (no daemon, not
    trusted, refused or any failure: the caller runs `gpuman release`)."""
    conn = _greeted()
    if conn is None:
        return None
    try:
        r = conn.call("release", {"lease_id": int(lease_id)})
        if r.get("ok"):
            if r.get("result") not in ({}, None):
                return None  # e.g. {"ending": N}: not ours to handle here
            return "ok"
        code = (r.get("error") or {}).get("code")
        if code == "not_found":
            return "not_found"
        return None
    except Exception:
        return None
    finally:
        conn.close()


def _start_ticks():
    """This process's start time, field 22 of /proc/self/stat (the lease's holder)."""
    with open("/proc/self/stat") as f:
        text = f.read()
    return int(text[text.rindex(")") + 2:].split()[19])


def try_acquire(n, command):
    """Leases ``n`` whole GPUs for this process through the daemon, which answers with the
    GPUs and the child's environment from its own builder (``describe``). Returns the
    result (a dict like ``select --lease --format json``'s), or None when there is no
    trusted daemon or it did not grant one: the caller then runs the CLI, which decides
    and words every refusal. Only for a request the CLI would send as ``{"count": n}``
    (the caller checks)."""
    conn = _greeted()
    if conn is None:
        return None
    granted = None
    try:
        r = conn.call("acquire", {"request": {"count": int(n)}, "command": command, "pid": os.getpid(),
                                  "start_time_ticks": _start_ticks(), "kind": "select", "describe": True})
        if not r.get("ok"):
            return None
        granted = r.get("result") or {}
        if not isinstance(granted.get("env"), dict) or len(granted.get("gpus") or []) != len(granted.get("gpu_uuids") or []):
            # A daemon from before `describe`: this lease is no use here; give it back.
            if granted.get("lease_id") is not None and not granted.get("nested"):
                conn.call("release", {"lease_id": int(granted["lease_id"])})
            return None
        granted["cuda_visible_devices"] = granted["env"].get("CUDA_VISIBLE_DEVICES", ",".join(granted["gpu_uuids"]))
        return granted
    except Exception:
        if granted and granted.get("lease_id") is not None and not granted.get("nested"):
            try:
                conn.call("release", {"lease_id": int(granted["lease_id"])})
            except Exception:
                pass
        return None
    finally:
        conn.close()
