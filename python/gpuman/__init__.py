"""gpuman: lease GPUs from Python (standard library only).

The gpuman CLI is the authority: every choice of GPUs goes through
``gpuman select --lease``, run as a child of this process, so the lease lives as long as
this Python process does (the CLI records its *parent*). Releasing speaks the daemon's
protocol natively when a trusted daemon serves, else runs ``gpuman release ID``.

See docs/python.md for the API, the exception table and the measured costs.
"""

import os
import sys

__all__ = [
    "acquire", "lease", "release", "status", "select", "leases", "Lease", "apply_memory_limit",
    "GpumanError", "NoGpus", "Busy", "PermissionDenied", "DaemonUnavailable",
    "CudaAlreadyInitialized",
]

# Rewritten by the install step to the absolute path of the installed binary.
_INSTALLED_BINARY = None

_DEFAULT_SOCKET = "/run/gpuman/gpuman.sock"


# ---------------------------------------------------------------------------- errors

class GpumanError(Exception):
    """A gpuman failure: ``message`` is the CLI's one line (after ``gpuman: error: ``),
    ``exit_code`` the CLI's exit code (None when no CLI ran)."""

    def __init__(self, message, exit_code=None):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class NoGpus(GpumanError):
    """No GPUs or no driver (exit 3), or a request that can never be met (exit 4/2)."""


class Busy(GpumanError):
    """Not enough GPUs free now and no wait asked, or the wait ran out (exit 4)."""


class PermissionDenied(GpumanError):
    """Not allowed (exit 5), e.g. releasing another user's lease."""


class DaemonUnavailable(GpumanError):
    """The machine's daemon is expected but does not answer (exit 3)."""


class CudaAlreadyInitialized(GpumanError):
    """This process already initialised CUDA: CUDA_VISIBLE_DEVICES would be ignored."""


# Exit-4 messages that mean "never", not "not now" (src/policy/lease_rules.cc,
# src/policy/selection.cc): the CLI uses exit 4 for both.
_NEVER_MARKERS = (
    "; this machine has ",
    " can ever be eligible",
    " but --gpus names ",
    " (max_gpus_per_user)",  # "may hold at most N" is never; "holds N of at most" is busy (checked below)
    "this machine has no gpus",
    " inside lease ",
)


def _error_for(exit_code, message):
    low = message.lower()
    if exit_code == 4:
        never = any(m in low for m in _NEVER_MARKERS)
        if " holds " in low and " of at most " in low:  # the cap, only for now
            never = False
        if low.startswith("gave up after"):
            never = False
        return (NoGpus if never else Busy)(message, exit_code)
    if exit_code == 5:
        return PermissionDenied(message, exit_code)
    if exit_code == 3:
        if "daemon" in low:
            return DaemonUnavailable(message, exit_code)
        return NoGpus(message, exit_code)
    if exit_code in (124,) or (exit_code in (130, 143, 129) and "interrupted" in low):
        return Busy(message, exit_code)
    return GpumanError(message, exit_code)


# ---------------------------------------------------------------------------- the CLI

def _binary():
    b = os.environ.get("GPUMAN_BINARY")
    if b:
        return b
    import shutil
    b = shutil.which("gpuman")
    if b:
        return b
    if _INSTALLED_BINARY and os.path.exists(_INSTALLED_BINARY):
        return _INSTALLED_BINARY
    raise GpumanError("the gpuman binary was not found: set GPUMAN_BINARY or put gpuman on PATH")


def _message_from(stderr, exit_code):
    lines = [l for l in stderr.splitlines() if l.strip()]
    prefix = "gpuman: error: "
    for line in reversed(lines):
        if line.startswith(prefix):
            return line[len(prefix):]
    if lines:
        return lines[-1]
    return "gpuman exited with code %d" % exit_code


def _run(args, timeout=None):
    """Runs ``gpuman ARGS``; returns stdout, raises the mapped exception on failure."""
    import subprocess
    try:
        p = subprocess.run([_binary()] + list(args), stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout)
    except FileNotFoundError as e:
        raise GpumanError("cannot run gpuman: %s" % e) from None
    out = p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace")
    if p.returncode != 0:
        raise _error_for(p.returncode, _message_from(err, p.returncode))
    return out


def _run_json(args):
    import json
    out = _run(args)
    try:
        return json.loads(out)
    except ValueError:
        raise GpumanError("gpuman %s printed no JSON: %r" % (" ".join(args), out[:200])) from None


def _id_list(v):
    if v is None:
        return None
    if isinstance(v, (int, str)):
        s = str(v)
    else:
        s = ",".join(str(x) for x in v)
    s = s.replace(" ", "")
    return s


def _size(v):
    # A bare number is bytes; strings such as "20GiB" go as they are.
    return ("%dB" % v) if isinstance(v, int) and not isinstance(v, bool) else str(v)


def _selection_args(n, gpus, min_free_memory, model, exclude, prefer, require, gpu_memory=None, mps=False,
                    gpu_share=None):
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError("n must be an int, not %r" % (n,))
    a = ["-n", str(n)]
    g = _id_list(gpus)
    if g:
        a += ["--gpus", g]
    x = _id_list(exclude)
    if x:
        a += ["--exclude", x]
    if min_free_memory is not None:
        a += ["--min-free-memory", _size(min_free_memory)]
    if gpu_memory is not None:
        a += ["--gpu-memory", _size(gpu_memory)]
    if mps:
        a.append("--mps")
    if gpu_share is not None:
        if isinstance(gpu_share, bool) or not isinstance(gpu_share, int):
            raise TypeError("gpu_share must be an int percent, not %r" % (gpu_share,))
        a += ["--gpu-share", str(gpu_share)]
    if model is not None:
        a += ["--model", str(model)]
    if prefer is not None:
        a += ["--prefer", str(prefer)]
    if require is not None:
        a += ["--require", _id_list(require)]
    return a


def _wait_arg(wait, timeout):
    if timeout is not None:
        if not wait:
            raise ValueError("timeout= needs wait=True")
        t = float(timeout)
        if t < 0:
            raise ValueError("timeout must be >= 0")
        ms = int(round(t * 1000))
        return ["--wait=%dms" % ms] if ms % 1000 else ["--wait=%ds" % (ms // 1000)]
    if wait:
        return ["--wait"]
    return []


# ---------------------------------------------------------------------------- CUDA check

def _cuda_initialized():
    """A description of why this process already has CUDA, or None."""
    mapped = False
    try:
        with open("/proc/self/maps", "rb") as f:
            for line in f:
                if b"libcuda.so" in line:
                    mapped = True
                    break
    except OSError:
        pass
    frameworks = [m for m in ("torch", "tensorflow", "jax") if m in sys.modules]
    torch_init = False
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            torch_init = bool(torch.cuda.is_initialized())
        except Exception:
            torch_init = False
    if not (mapped or torch_init):
        return None
    why = []
    if torch_init:
        why.append("torch.cuda.is_initialized() is True")
    if mapped:
        why.append("libcuda.so is loaded into this process")
    named = ", ".join(frameworks) if frameworks else "an unknown framework"
    return ("CUDA was already initialised in this process (%s; imported: %s): "
            "CUDA_VISIBLE_DEVICES set now would be ignored. Call gpuman.lease()/acquire() "
            "before the first CUDA call, or run the script under `gpuman run`"
            % ("; ".join(why), named))


def _check_cuda():
    why = _cuda_initialized()
    if why:
        raise CudaAlreadyInitialized(why)


# ---------------------------------------------------------------------------- Lease

class Lease(object):
    """GPUs leased to this process. Lives until ``release()`` or this process exits."""

    def __init__(self, data, enclosing=None):
        self.data = data
        self.id = data.get("lease_id")
        gpus = data.get("gpus") or []
        self.uuids = [g["uuid"] for g in gpus]
        self.indices = [g.get("index") for g in gpus]
        self.names = [g.get("name") for g in gpus]
        self.master_port = data.get("master_port")
        # A memory slice's size per GPU in bytes (docs/share.md); None for whole GPUs.
        self.gpu_memory = data.get("gpu_memory_bytes")
        # An MPS lease (mps=True, docs/share.md "MPS"): env has the CUDA_MPS_* variables.
        self.mps = bool(data.get("mps", False))
        # Inside a lease (GPUMAN_LEASE_ID) the CLI joins the enclosing lease instead of
        # taking a new one; that lease is not ours to give back (as `run` never releases it).
        if "nested" in data:
            self.nested = bool(data["nested"])
        else:  # a CLI from before the member
            self.nested = self.id is not None and str(self.id) == (enclosing or "")
        self._released = False
        env = {
            "CUDA_VISIBLE_DEVICES": data.get("cuda_visible_devices") or ",".join(self.uuids),
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "NVIDIA_VISIBLE_DEVICES": ",".join(self.uuids),
        }
        if self.id is not None:
            env["GPUMAN_LEASE_ID"] = str(self.id)
        if self.master_port is not None:
            env["MASTER_ADDR"] = "127.0.0.1"
            env["MASTER_PORT"] = str(self.master_port)
            env["PET_MASTER_PORT"] = str(self.master_port)  # torchrun's own variable
            if self.uuids:
                env["PET_NPROC_PER_NODE"] = str(len(self.uuids))
        # The CLI's own builder of a child's environment, when it says (slices included).
        if isinstance(data.get("env"), dict):
            env = {str(k): str(v) for k, v in data["env"].items()}
        self.env = env

    @property
    def released(self):
        return self._released

    def devices(self):
        """One torch-style device name per GPU: CUDA numbers the visible GPUs from 0."""
        return ["cuda:%d" % i for i in range(len(self.uuids))]

    def release(self):
        """Gives the GPUs back. Idempotent."""
        if self._released or self.id is None or self.nested:
            self._released = True
            return
        _release(self.id, missing_ok=True)
        self._released = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False

    def __repr__(self):
        return "<gpuman.Lease %s gpus=%s%s>" % (self.id, self.indices,
                                                 " released" if self._released else "")


# ---------------------------------------------------------------------------- acquire

def acquire(n=1, gpus=None, wait=False, timeout=None, min_free_memory=None, model=None,
            exclude=None, prefer=None, require=None, gpu_memory=None, mps=False, gpu_share=None):
    """Leases ``n`` GPUs for this process (``gpuman select --lease``) and returns a Lease.

    ``gpu_memory`` ("20GiB", or bytes) leases a memory slice of each GPU instead of whole
    GPUs (docs/share.md). ``mps=True`` makes it an MPS lease of one GPU, ``gpu_share`` (a
    percent) its CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (docs/share.md, "MPS"; needs the daemon).
    The environment of this process is not changed: use ``lease.env``, or ``lease()``."""
    _check_cuda()
    enclosing = os.environ.get("GPUMAN_LEASE_ID")
    if _plain(n, gpus, wait, timeout, min_free_memory, model, exclude, prefer, require, gpu_memory, mps, gpu_share):
        lease = _acquire_natively(n, enclosing)
        if lease is not None:
            return lease
    args = ["select", "--lease", "--format", "json"]
    args += _selection_args(n, gpus, min_free_memory, model, exclude, prefer, require, gpu_memory, mps, gpu_share)
    args += _wait_arg(wait, timeout)
    data = _spawn_lease(args, waiting=bool(wait))
    if not isinstance(data, dict) or "gpus" not in data:
        raise GpumanError("gpuman select printed an unexpected answer: %r" % (data,))
    return Lease(data, enclosing)


# Variables through which the CLI narrows or joins a lease (an enclosing lease, a
# container's or Slurm's allocation, a CUDA_VISIBLE_DEVICES left in the environment): with
# any of them set, the CLI builds the request (docs/python.md, "Costs"). CUDA_DEVICE_ORDER
# matters to it only beside CUDA_VISIBLE_DEVICES (visibility/allocation.cc).
_CLI_VARIABLES = ("GPUMAN_LEASE_ID", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")


def _plain(n, gpus, wait, timeout, min_free_memory, model, exclude, prefer, require, gpu_memory, mps, gpu_share):
    """True for a request of ``n`` whole GPUs and nothing else, in an environment that does
    not narrow it: the daemon can take it as ``{"count": n}`` exactly as the CLI would."""
    if type(n) is not int or not 1 <= n <= 4096 or wait or timeout is not None or mps:
        return False
    if any(v is not None for v in (gpus, min_free_memory, model, exclude, prefer, require, gpu_memory, gpu_share)):
        return False
    env = os.environ
    return not any(k in env for k in _CLI_VARIABLES) and not any(k.startswith("SLURM_") for k in env)


def _acquire_natively(n, enclosing):
    """A plain lease straight from the daemon (no gpuman process): the daemon applies every
    rule and builds the environment. None: use the CLI. Ctrl-C during the call is held
    until the lease is ours, then gives it back and raises."""
    import signal
    from . import _daemon
    data = None
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
        try:
            data = _daemon.try_acquire(n, _command_line())
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        return Lease(data, enclosing) if data is not None else None
    except BaseException:
        if data is not None and data.get("lease_id") is not None and not data.get("nested"):
            _release(data["lease_id"], missing_ok=True)
        raise


def _command_line():
    """What `leases` shows for a lease this process holds."""
    argv = [os.path.basename(sys.executable or "python3")] + list(sys.argv[:1] or [])
    return (" ".join(a for a in argv if a) + " (gpuman.acquire)")[:200]


def _spawn_lease(args, waiting):
    import json
    import subprocess
    try:
        p = subprocess.Popen([_binary()] + args, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError as e:
        raise GpumanError("cannot run gpuman: %s" % e) from None
    with p:
        return _collect_lease(p, waiting)


def _collect_lease(p, waiting):
    import json
    err_lines = []
    reader = None
    if waiting:
        # Show the CLI's "waiting for ..." lines as they come (as `select --lease --wait` does).
        import threading

        def pump():
            for raw in iter(p.stderr.readline, b""):
                line = raw.decode("utf-8", "replace")
                err_lines.append(line)
                if not line.startswith("gpuman: error: "):
                    try:
                        sys.stderr.write(line)
                        sys.stderr.flush()
                    except Exception:
                        pass
        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
    try:
        if reader is not None:
            out = p.stdout.read()
            p.wait()
            reader.join()
            err = "".join(err_lines)
        else:
            out, err_b = p.communicate()
            err = err_b.decode("utf-8", "replace")
    except BaseException:
        # Interrupted (Ctrl-C) while waiting: end the child; a lease it got anyway goes back.
        try:
            p.terminate()
        except OSError:
            pass
        try:
            rest, _ = p.communicate(timeout=10)
        except Exception:
            p.kill()
            rest = b""
        if p.returncode == 0:
            try:
                lid = json.loads(rest.decode()).get("lease_id")
                if lid is not None:
                    _release(lid, missing_ok=True)
            except Exception:
                pass
        raise
    out = out.decode("utf-8", "replace")
    if p.returncode != 0:
        raise _error_for(p.returncode, _message_from(err, p.returncode))
    try:
        return json.loads(out)
    except ValueError:
        raise GpumanError("gpuman select printed no JSON: %r" % out[:200]) from None


class _EnvLease(object):
    """``with gpuman.lease(...) as l``: acquire, set os.environ, restore and release on exit."""

    def __init__(self, kwargs):
        self._kwargs = kwargs
        self._lease = None
        self._saved = None

    def __enter__(self):
        self._lease = acquire(**self._kwargs)
        self._saved = {k: os.environ.get(k) for k in self._lease.env}
        try:
            os.environ.update(self._lease.env)
        except BaseException:
            self._restore()
            self._lease.release()
            raise
        return self._lease

    def _restore(self):
        for k, v in self._saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def __exit__(self, *exc):
        try:
            self._restore()
        finally:
            self._lease.release()
        return False


def lease(n=1, gpus=None, wait=False, timeout=None, min_free_memory=None, model=None,
          exclude=None, prefer=None, require=None, gpu_memory=None, mps=False, gpu_share=None):
    """Context manager: ``with gpuman.lease(n=2) as l:`` leases, sets os.environ from
    ``l.env`` for the block, then restores the environment and releases, even on errors."""
    return _EnvLease(dict(n=n, gpus=gpus, wait=wait, timeout=timeout,
                          min_free_memory=min_free_memory, model=model, exclude=exclude,
                          prefer=prefer, require=require, gpu_memory=gpu_memory, mps=mps,
                          gpu_share=gpu_share))


# ---------------------------------------------------------------------------- release

def release(lease_id):
    """Releases lease ``lease_id`` (yours; another user's only as root/admin: else
    PermissionDenied). An unknown id raises GpumanError (exit 2)."""
    if isinstance(lease_id, Lease):
        lease_id.release()
        return
    _release(int(lease_id), missing_ok=False)


def _release(lease_id, missing_ok):
    from . import _daemon
    verdict = _daemon.try_release(lease_id)
    if verdict == "ok":
        return
    if verdict == "not_found" and missing_ok:
        return
    # No trusted daemon, or the daemon refused: the CLI decides and words it.
    try:
        _run(["release", str(lease_id)])
    except GpumanError as e:
        if missing_ok and e.exit_code == 2 and e.message.startswith("no lease"):
            return
        raise


# ---------------------------------------------------------------------------- queries

def status(gpus=None, processes=True):
    """``gpuman status --json``, parsed."""
    a = ["status", "--json"]
    g = _id_list(gpus)
    if g:
        a += ["--gpus", g]
    if not processes:
        a.append("--no-processes")
    return _run_json(a)


def select(n=1, gpus=None, min_free_memory=None, model=None, exclude=None, prefer=None,
           require=None, gpu_memory=None, mps=False, gpu_share=None):
    """A preview: what a lease would get now (``gpuman select --format json``); leases nothing."""
    return _run_json(["select", "--format", "json"] +
                     _selection_args(n, gpus, min_free_memory, model, exclude, prefer, require, gpu_memory, mps,
                                     gpu_share))


def leases():
    """``gpuman leases --json``, parsed."""
    return _run_json(["leases", "--json"])


# ---------------------------------------------------------------------------- slices

def apply_memory_limit(lease=None):
    """Keeps this process's framework inside its memory slice (docs/share.md).

    The slice is ``lease.gpu_memory`` or, without a lease, ``GPUMAN_GPU_MEMORY`` of the
    environment (what ``gpuman run --gpu-memory`` gives). With torch imported it calls
    ``torch.cuda.set_per_process_memory_fraction`` for every visible device; with
    TensorFlow, a logical device with that ``memory_limit`` per GPU (before TensorFlow
    touches a GPU). Returns a short description of what it set. Raises GpumanError without
    a slice or without either framework imported."""
    size = lease.gpu_memory if lease is not None else None
    if size is None:
        raw = os.environ.get("GPUMAN_GPU_MEMORY")
        if raw is None:
            raise GpumanError("no memory slice: this process holds whole GPUs "
                              "(lease with gpu_memory=, or run under `gpuman run --gpu-memory`)")
        try:
            size = int(raw)
        except ValueError:
            raise GpumanError("GPUMAN_GPU_MEMORY=%r is not a number of bytes" % raw) from None
    torch = sys.modules.get("torch")
    if torch is not None:
        done = []
        for i in range(torch.cuda.device_count()):
            total = torch.cuda.get_device_properties(i).total_memory
            fraction = min(1.0, float(size) / float(total))
            torch.cuda.set_per_process_memory_fraction(fraction, i)
            done.append("cuda:%d %.3f" % (i, fraction))
        return "torch: " + ", ".join(done)
    tf = sys.modules.get("tensorflow")
    if tf is not None:
        mib = size // (1 << 20)
        gpus = tf.config.list_physical_devices("GPU")
        for g in gpus:
            tf.config.set_logical_device_configuration(
                g, [tf.config.LogicalDeviceConfiguration(memory_limit=mib)])
        return "tensorflow: memory_limit=%d MiB on %d GPU(s)" % (mib, len(gpus))
    raise GpumanError("apply_memory_limit: import torch or tensorflow first "
                      "(JAX reads XLA_PYTHON_CLIENT_MEM_FRACTION, which gpuman already sets)")
