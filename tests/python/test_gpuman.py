"""Tests of the Python package gpuman against the real CLI on a simulated machine.

Run: GPUMAN_BINARY=build/gpuman PYTHONPATH=python python3 -m unittest discover -s tests/python -v
(ctest: python.gpuman). Every test gets its own lease table, state dir, config dir and,
where it needs one, its own daemon.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
SCENARIOS = os.environ.get("GPUMAN_SCENARIO_DIR") or os.path.join(ROOT, "scenarios")
PYDIR = os.path.join(ROOT, "python")
if PYDIR not in sys.path:
    sys.path.insert(0, PYDIR)

import gpuman  # noqa: E402
from gpuman import _daemon  # noqa: E402

BINARY = os.environ.get("GPUMAN_BINARY") or os.path.join(ROOT, "build", "gpuman")
USERS = ("gpumanta", "gpumantb")


def idle_scenario(directory):
    """Writes DIRECTORY/idle.json, h100-8 with every GPU's processes removed; returns
    (its path, the GPUs' UUIDs sorted)."""
    with open(os.path.join(SCENARIOS, "h100-8.json")) as f:
        scen = json.load(f)
    for g in scen["gpus"]:
        g["processes"] = []
    path = os.path.join(directory, "idle.json")
    with open(path, "w") as f:
        json.dump(scen, f)
    os.chmod(path, 0o644)
    return path, sorted(g["uuid"] for g in scen["gpus"])


def _gpus_of(listing):
    return sorted(g["uuid"] for l in listing["leases"] for g in l["gpus"])


class Base(unittest.TestCase):
    """A private idle 8-GPU machine (h100-8 with its processes removed)."""

    def setUp(self):
        if not os.access(BINARY, os.X_OK):
            self.skipTest("no gpuman binary at %s" % BINARY)
        self.dir = tempfile.mkdtemp(prefix="gpuman-py-")
        os.chmod(self.dir, 0o755)  # the daemon socket's directory: root's, 0755 (trust rules)
        self.scenario, self.uuids = idle_scenario(self.dir)
        for d in ("leases", "state", "config"):
            os.mkdir(os.path.join(self.dir, d))
            os.chmod(os.path.join(self.dir, d), 0o755)
        self._saved_env = dict(os.environ)
        for k in ("GPUMAN_SOCKET", "CUDA_VISIBLE_DEVICES", "GPUMAN_LEASE_ID", "NVIDIA_VISIBLE_DEVICES",
                  "GPUMAN_CONFIG", "MASTER_ADDR", "MASTER_PORT"):
            os.environ.pop(k, None)
        os.environ.update({
            "GPUMAN_BINARY": BINARY,
            "GPUMAN_SIMULATE": self.scenario,
            "GPUMAN_LEASE_DIR": os.path.join(self.dir, "leases"),
            "GPUMAN_STATE_DIR": os.path.join(self.dir, "state"),
            "XDG_CONFIG_HOME": os.path.join(self.dir, "config"),
            "GPUMAN_KERNEL_LOG": "/dev/null",
        })
        self.daemon = None
        self.children = []

    def tearDown(self):
        for p in self.children:
            if p.poll() is None:
                p.kill()
            p.wait()
            for f in (p.stdin, p.stdout, p.stderr):
                try:
                    f.close()
                except OSError:
                    pass
        if self.daemon is not None:
            self.daemon.terminate()
            try:
                self.daemon.wait(10)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()
        os.environ.clear()
        os.environ.update(self._saved_env)
        shutil.rmtree(self.dir, ignore_errors=True)

    def start_daemon(self):
        sock = os.path.join(self.dir, "d.sock")
        self._log = open(os.path.join(self.dir, "daemon.log"), "wb")
        self.addCleanup(self._log.close)
        self.daemon = subprocess.Popen(
            [BINARY, "--simulate", self.scenario, "daemon", "--socket", sock,
             "--state-dir", os.path.join(self.dir, "dstate")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self._log)
        deadline = time.time() + 15
        while time.time() < deadline:
            if self.daemon.poll() is not None:
                self.fail("daemon exited: " + open(os.path.join(self.dir, "daemon.log")).read())
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(sock)
                break
            except OSError:
                time.sleep(0.05)
        else:
            self.fail("daemon did not answer")
        os.environ["GPUMAN_SOCKET"] = sock
        return sock

    def spawn(self, script, user=None, **kw):
        code = textwrap.dedent(script)
        # Another user cannot run a python under /root (pyenv): use the system one for them.
        py = "/usr/bin/python3" if user and os.path.exists("/usr/bin/python3") else sys.executable
        cmd = [py, "-c", code]
        if user:
            env_args = ["env"] + ["%s=%s" % (k, os.environ[k]) for k in (
                "GPUMAN_BINARY", "GPUMAN_SIMULATE", "GPUMAN_LEASE_DIR", "GPUMAN_STATE_DIR",
                "XDG_CONFIG_HOME", "GPUMAN_SOCKET") if k in os.environ] + ["PYTHONPATH=" + PYDIR, "HOME=/"]
            cmd = ["runuser", "-u", user, "--"] + env_args + cmd
        env = dict(os.environ, PYTHONPATH=PYDIR)
        p = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, **kw)
        self.children.append(p)
        return p


HOLDER = """
    import sys, gpuman
    l = gpuman.acquire(n=%d)
    print(l.id, flush=True)
    sys.stdin.read()   # hold until the test closes stdin (or kills us)
    l.release()
"""


class WithoutDaemon(Base):
    def test_lease_and_release(self):
        l = gpuman.acquire(n=2)
        self.assertIsInstance(l.id, int)
        self.assertEqual(len(l.uuids), 2)
        self.assertEqual(len(l.indices), 2)
        self.assertEqual(l.devices(), ["cuda:0", "cuda:1"])
        self.assertEqual(l.env["CUDA_VISIBLE_DEVICES"], ",".join(l.uuids))
        self.assertEqual(l.env["NVIDIA_VISIBLE_DEVICES"], ",".join(l.uuids))
        self.assertEqual(l.env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID")
        self.assertEqual(l.env["GPUMAN_LEASE_ID"], str(l.id))
        listed = gpuman.leases()["leases"]
        self.assertEqual([x["id"] for x in listed], [l.id])
        self.assertEqual(listed[0]["processes"][0]["pid"], os.getpid())  # held by this process
        l.release()
        l.release()  # idempotent
        self.assertTrue(l.released)
        self.assertEqual(gpuman.leases()["leases"], [])

    def test_env_matches_cli_env_format(self):
        out = subprocess.run([BINARY, "select", "--lease", "--format", "env", "-n", "2"],
                             check=True, capture_output=True, text=True).stdout
        cli = dict(line[len("export "):].split("=", 1) for line in out.splitlines())
        gpuman.release(int(cli["GPUMAN_LEASE_ID"]))  # that lease was ours too: we are its parent
        with gpuman.acquire(n=2) as l:
            self.assertEqual(sorted(l.env), sorted(cli))
            for k in ("CUDA_DEVICE_ORDER", "MASTER_ADDR", "PET_NPROC_PER_NODE"):
                if k in cli:
                    self.assertEqual(l.env[k], cli[k])
            if "MASTER_PORT" in cli:
                self.assertEqual(l.env["MASTER_PORT"], str(l.master_port))
        self.assertEqual(gpuman.leases()["leases"], [])

    def test_memory_slices_share_a_gpu_and_set_the_frameworks_limits(self):
        a = gpuman.acquire(gpus=3, gpu_memory="30GiB")
        b = gpuman.acquire(gpus=3, gpu_memory=30 * 2**30)
        try:
            self.assertEqual(a.indices, [3])
            self.assertEqual(b.indices, [3])
            self.assertEqual(a.gpu_memory, 30 * 2**30)
            self.assertEqual(a.env["GPUMAN_GPU_MEMORY"], str(30 * 2**30))
            self.assertEqual(a.env["XLA_PYTHON_CLIENT_PREALLOCATE"], "false")
            self.assertEqual(a.env["TF_FORCE_GPU_ALLOW_GROWTH"], "true")
            self.assertIn("XLA_PYTHON_CLIENT_MEM_FRACTION", a.env)
            # A third does not fit beside them; a whole GPU 3 neither.
            with self.assertRaises(gpuman.Busy):
                gpuman.acquire(gpus=3, gpu_memory="30GiB")
            with self.assertRaises(gpuman.Busy):
                gpuman.acquire(gpus=3)
            # The framework limit from the slice: a stand-in torch records the call.
            import types
            calls = []
            fake = types.ModuleType("torch")
            fake.cuda = types.SimpleNamespace(
                device_count=lambda: 1,
                get_device_properties=lambda i: types.SimpleNamespace(total_memory=120 * 2**30),
                set_per_process_memory_fraction=lambda f, i: calls.append((round(f, 3), i)),
                is_initialized=lambda: False)
            sys.modules["torch"] = fake
            try:
                self.assertEqual(gpuman.apply_memory_limit(a), "torch: cuda:0 0.250")
                self.assertEqual(calls, [(0.25, 0)])
            finally:
                del sys.modules["torch"]
            with self.assertRaises(gpuman.GpumanError):
                gpuman.apply_memory_limit(a)  # neither torch nor tensorflow imported
        finally:
            a.release()
            b.release()
        with gpuman.acquire() as whole:
            self.assertIsNone(whole.gpu_memory)
            self.assertNotIn("GPUMAN_GPU_MEMORY", whole.env)

    def test_mps_needs_the_daemon_and_gpu_share_needs_mps(self):
        # No daemon here (the machine lease table): MPS is refused with the reason.
        with self.assertRaises(gpuman.GpumanError) as e:
            gpuman.acquire(gpu_memory="10GiB", mps=True)
        self.assertIn("--mps needs the gpuman daemon", str(e.exception))
        with self.assertRaises(gpuman.GpumanError) as e:
            gpuman.acquire(gpu_memory="10GiB", gpu_share=50)
        self.assertIn("--gpu-share needs --mps", str(e.exception))
        with self.assertRaises(TypeError):
            gpuman.acquire(mps=True, gpu_share="half")
        self.assertEqual(gpuman.leases()["leases"], [])

    def test_environ_set_and_restored(self):
        os.environ["CUDA_DEVICE_ORDER"] = "FASTEST_FIRST"
        self.assertNotIn("CUDA_VISIBLE_DEVICES", os.environ)
        with self.assertRaises(ZeroDivisionError):
            with gpuman.lease(n=2) as l:
                for k, v in l.env.items():
                    self.assertEqual(os.environ[k], v)
                self.assertEqual(len(gpuman.leases()["leases"]), 1)
                1 / 0
        self.assertEqual(os.environ["CUDA_DEVICE_ORDER"], "FASTEST_FIRST")
        for k in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "GPUMAN_LEASE_ID", "MASTER_PORT"):
            self.assertNotIn(k, os.environ)
        self.assertTrue(l.released)
        self.assertEqual(gpuman.leases()["leases"], [])

    def test_second_acquire_busy(self):
        l = gpuman.acquire(n=8)
        with self.assertRaises(gpuman.Busy) as cm:
            gpuman.acquire(n=1)
        self.assertEqual(cm.exception.exit_code, 4)
        self.assertIn("need 1 GPU, 0 eligible", cm.exception.message)
        t = time.time()
        with self.assertRaises(gpuman.Busy) as cm:
            gpuman.acquire(n=1, wait=True, timeout=0.5)
        self.assertIn("gave up after", cm.exception.message)
        self.assertLess(time.time() - t, 5)
        l.release()
        gpuman.acquire(n=8).release()

    def test_kill_9_frees(self):
        p = self.spawn(HOLDER % 8)
        lid = int(p.stdout.readline())
        held = gpuman.leases()["leases"]
        self.assertEqual([x["id"] for x in held], [lid])
        self.assertEqual(held[0]["processes"][0]["pid"], p.pid)
        with self.assertRaises(gpuman.Busy):
            gpuman.acquire(n=1)
        p.send_signal(signal.SIGKILL)
        p.wait()
        l = gpuman.acquire(n=8)  # the dead holder's lease is reclaimed
        self.assertEqual(sorted(l.uuids), self.uuids)
        l.release()

    def test_two_waiters_never_overlap(self):
        script = """
            import time, gpuman
            l = gpuman.acquire(n=8, wait=True)
            t0 = time.time(); time.sleep(0.4); t1 = time.time()
            l.release()
            print(t0, t1, flush=True)
        """
        ps = [self.spawn(script), self.spawn(script)]
        spans = []
        for p in ps:
            out, err = p.communicate(timeout=20)
            self.assertEqual(p.returncode, 0, err)
            spans.append(tuple(float(x) for x in out.split()))
        spans.sort()
        self.assertLessEqual(spans[0][1], spans[1][0], spans)  # the second began after the first ended

    def test_cuda_already_initialized(self):
        fake = types.ModuleType("torch")
        fake.cuda = types.SimpleNamespace(is_initialized=lambda: True)
        sys.modules["torch"] = fake
        try:
            with self.assertRaises(gpuman.CudaAlreadyInitialized) as cm:
                gpuman.acquire()
            self.assertIn("torch", cm.exception.message)
            with self.assertRaises(gpuman.CudaAlreadyInitialized):
                with gpuman.lease():
                    self.fail("entered")
            fake.cuda.is_initialized = lambda: False
            gpuman.acquire().release()  # imported but not initialised: fine
        finally:
            del sys.modules["torch"]
        self.assertEqual(gpuman.leases()["leases"], [])

    def test_queries_return_dicts(self):
        st = gpuman.status()
        self.assertIsInstance(st, dict)
        self.assertEqual(len(st["gpus"]), 8)
        pre = gpuman.select(n=3, exclude=[0, 1])
        self.assertEqual(len(pre["gpus"]), 3)
        self.assertNotIn(0, [g["index"] for g in pre["gpus"]])
        self.assertIsNone(pre["lease_id"])
        self.assertEqual(gpuman.leases()["leases"], [])  # a preview leases nothing
        self.assertEqual(gpuman.select(gpus="5")["gpus"][0]["index"], 5)
        self.assertIsInstance(gpuman.leases(), dict)

    def test_bad_arguments(self):
        with self.assertRaises(gpuman.GpumanError) as cm:
            gpuman.acquire(n=0)
        self.assertEqual(cm.exception.exit_code, 2)
        self.assertIn("count must be at least 1", cm.exception.message)
        with self.assertRaises(gpuman.NoGpus) as cm:
            gpuman.acquire(n=99)
        self.assertEqual(cm.exception.message, "asked for 99 GPUs; this machine has 8 GPUs")
        with self.assertRaises(gpuman.NoGpus):
            gpuman.select(model="A100")
        with self.assertRaises(gpuman.GpumanError) as cm:
            gpuman.release(12345)
        self.assertIn("no lease 12345", cm.exception.message)

    def test_untrusted_socket_dir_not_spoken_to(self):
        d = os.path.join(self.dir, "open")
        os.mkdir(d)
        os.chmod(d, 0o777)
        s = socket.socket(socket.AF_UNIX)
        s.bind(os.path.join(d, "x.sock"))
        try:
            self.assertFalse(_daemon._trusted_path(os.path.join(d, "x.sock")))
            os.chmod(d, 0o755)
            self.assertTrue(_daemon._trusted_path(os.path.join(d, "x.sock")))
        finally:
            s.close()


class WithDaemon(Base):
    def test_lease_and_native_release(self):
        self.start_daemon()
        l = gpuman.acquire(n=2)
        listed = gpuman.leases()["leases"]
        self.assertEqual([x["id"] for x in listed], [l.id])
        self.assertEqual(_daemon.try_release(l.id), "ok")  # the protocol, no CLI
        self.assertEqual(gpuman.leases()["leases"], [])
        l.release()  # already gone: still fine
        with gpuman.lease(n=8) as l2:
            self.assertEqual(os.environ["GPUMAN_LEASE_ID"], str(l2.id))
            # Nested (GPUMAN_LEASE_ID set): the CLI joins the enclosing lease; giving that
            # back is not the inner lease's job.
            inner = gpuman.acquire(n=2)
            self.assertTrue(inner.nested)
            self.assertEqual(inner.id, l2.id)
            inner.release()
            self.assertEqual([x["id"] for x in gpuman.leases()["leases"]], [l2.id])
            with self.assertRaises(gpuman.NoGpus):  # more than the machine has
                gpuman.acquire(n=9)
        self.assertEqual(gpuman.leases()["leases"], [])
        l3 = gpuman.acquire(n=8)
        with self.assertRaises(gpuman.Busy):
            gpuman.acquire()
        l3.release()

    def test_a_plain_lease_comes_straight_from_the_daemon(self):
        # acquire(n=...) with nothing else runs no gpuman process: the daemon grants it and
        # builds the environment (docs/python.md, "Costs"); with a binary that cannot run,
        # only this path can succeed.
        self.start_daemon()
        binary = os.environ["GPUMAN_BINARY"]
        os.environ["GPUMAN_BINARY"] = "/nonexistent/gpuman"
        try:
            native = gpuman.acquire(n=2)
        finally:
            os.environ["GPUMAN_BINARY"] = binary
        listed = gpuman.leases()["leases"]
        self.assertEqual([(x["id"], x["kind"]) for x in listed], [(native.id, "select")])
        self.assertIn("(gpuman.acquire)", listed[0]["command"])
        self.assertEqual(len(native.uuids), 2)
        self.assertEqual(native.env["CUDA_VISIBLE_DEVICES"], ",".join(native.uuids))
        # The same request through the CLI (a variable the CLI reads sends it there) gets
        # the same shape of answer and environment, from the same builder.
        os.environ["NVIDIA_VISIBLE_DEVICES"] = "all"  # a container's "every GPU": no limit
        try:
            via_cli = gpuman.acquire(n=2)
        finally:
            del os.environ["NVIDIA_VISIBLE_DEVICES"]
        self.assertNotIn("(gpuman.acquire)", [x["command"] for x in gpuman.leases()["leases"] if x["id"] == via_cli.id][0])
        self.assertEqual(sorted(native.env), sorted(via_cli.env))
        for k in native.env:
            if k not in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "GPUMAN_LEASE_ID", "MASTER_PORT",
                         "PET_MASTER_PORT"):
                self.assertEqual(native.env[k], via_cli.env[k], k)
        self.assertEqual(len(native.names), 2)
        self.assertEqual(native.names, via_cli.names)
        native.release()
        via_cli.release()
        self.assertEqual(gpuman.leases()["leases"], [])
        # Refusals still come worded by the CLI: busy, too many.
        held = gpuman.acquire(n=8)
        with self.assertRaises(gpuman.Busy):
            gpuman.acquire(n=1)
        held.release()
        with self.assertRaises(gpuman.NoGpus):
            gpuman.acquire(n=9)

    def test_kill_9_frees_through_daemon(self):
        self.start_daemon()
        p = self.spawn(HOLDER % 8)
        lid = int(p.stdout.readline())
        self.assertEqual([x["id"] for x in gpuman.leases()["leases"]], [lid])
        p.kill()
        p.wait()
        gpuman.acquire(n=8).release()

    def test_daemon_gone_is_unavailable(self):
        self.start_daemon()
        self.daemon.terminate()
        self.daemon.wait()
        self.daemon = None
        with self.assertRaises(gpuman.DaemonUnavailable) as cm:
            gpuman.acquire()
        self.assertEqual(cm.exception.exit_code, 3)

    def test_two_users(self):
        if os.getuid() != 0 or not shutil.which("runuser"):
            self.skipTest("needs root and runuser")
        for u in USERS:
            if subprocess.run(["id", "-u", u], capture_output=True).returncode != 0:
                subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", u], check=True)
        self.start_daemon()
        a = self.spawn(HOLDER % 8, user=USERS[0])
        line = a.stdout.readline()
        self.assertTrue(line.strip(), a.stderr.read() if a.poll() is not None else "no lease id")
        lid = int(line)
        listed = gpuman.leases()["leases"]
        self.assertEqual([(x["id"], x["user"]) for x in listed], [(lid, USERS[0])])
        b = self.spawn("""
            import gpuman
            try:
                gpuman.acquire(n=1)
                print("acquired")
            except gpuman.GpumanError as e:
                print(type(e).__name__, e.exit_code)
            try:
                gpuman.release(%d)
                print("released")
            except gpuman.GpumanError as e:
                print(type(e).__name__, e.exit_code, e.message)
        """ % lid, user=USERS[1])
        out, err = b.communicate(timeout=20)
        lines = out.splitlines()
        self.assertEqual(lines[0], "Busy 4", err)
        self.assertTrue(lines[1].startswith("PermissionDenied 5 "), out + err)
        self.assertEqual([x["id"] for x in gpuman.leases()["leases"]], [lid])  # still held
        a.stdin.close()  # the holder releases
        self.assertEqual(a.wait(10), 0, a.stderr.read())
        self.assertEqual(gpuman.leases()["leases"], [])


if __name__ == "__main__":
    unittest.main()
