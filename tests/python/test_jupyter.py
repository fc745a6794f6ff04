"""`gpuman jupyter install-kernel` with a real Jupyter kernel (Debian's python3-ipykernel):
the kernel runs under a gpuman lease from its start to its shutdown.

Skipped where /usr/bin/python3 cannot import ipykernel and jupyter_client. Run as the other
Python tests (ctest python.gpuman).
"""

import json
import os
import shutil
import subprocess
import tempfile
import textwrap
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
BINARY = os.environ.get("GPUMAN_BINARY") or os.path.join(ROOT, "build", "gpuman")
PYTHON = "/usr/bin/python3"
if HERE not in sys.path:
    sys.path.insert(0, HERE)
from test_gpuman import idle_scenario  # noqa: E402

# Runs in PYTHON (which has jupyter_client): starts the kernel by its spec, asks it for its
# environment, reads the lease table while it runs, shuts it down, reads it again.
DRIVER = textwrap.dedent("""
    import json, os, subprocess, sys
    from jupyter_client.manager import KernelManager
    binary = sys.argv[1]
    def leases():
        out = subprocess.run([binary, "leases", "--json"], capture_output=True, text=True, check=True).stdout
        return json.loads(out)["leases"]
    km = KernelManager(kernel_name="gpu2")
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    seen = {}
    def output(msg):
        if msg["msg_type"] == "stream":
            seen["out"] = seen.get("out", "") + msg["content"]["text"]
    kc.execute_interactive("import os; print(os.environ.get('CUDA_VISIBLE_DEVICES'), os.environ.get('GPUMAN_LEASE_ID'), os.environ.get('MASTER_PORT'))",
                           timeout=60, output_hook=output)
    during = leases()
    kc.stop_channels()
    km.shutdown_kernel(now=False)
    after = leases()
    print(json.dumps({"out": seen.get("out", ""), "during": during, "after": after}))
""")


def _has_jupyter():
    if not os.access(PYTHON, os.X_OK):
        return False
    r = subprocess.run([PYTHON, "-c", "import ipykernel, jupyter_client"], capture_output=True)
    return r.returncode == 0


@unittest.skipUnless(_has_jupyter(), "no ipykernel and jupyter_client for /usr/bin/python3 (apt install python3-ipykernel)")
class JupyterKernelTest(unittest.TestCase):
    def setUp(self):
        if not os.access(BINARY, os.X_OK):
            self.skipTest("no gpuman binary at %s" % BINARY)
        self.dir = tempfile.mkdtemp(prefix="gpuman-jupyter-")
        self.scenario, _ = idle_scenario(self.dir)
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("GPUMAN_SOCKET", "CUDA_VISIBLE_DEVICES", "GPUMAN_LEASE_ID", "GPUMAN_CONFIG")}
        self.env.update({
            "GPUMAN_SIMULATE": self.scenario,
            "GPUMAN_LEASE_DIR": os.path.join(self.dir, "leases"),
            "GPUMAN_STATE_DIR": os.path.join(self.dir, "state"),
            "XDG_CONFIG_HOME": os.path.join(self.dir, "config"),
            "JUPYTER_PATH": os.path.join(self.dir, "share", "jupyter"),
            "JUPYTER_RUNTIME_DIR": os.path.join(self.dir, "runtime"),
            "JUPYTER_DATA_DIR": os.path.join(self.dir, "data"),
            "JUPYTER_CONFIG_DIR": os.path.join(self.dir, "jconfig"),
            "IPYTHONDIR": os.path.join(self.dir, "ipython"),
            "PYTHONPATH": "",
        })

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_a_kernel_holds_its_lease_while_it_runs(self):
        r = subprocess.run([BINARY, "jupyter", "install-kernel", "--name", "gpu2", "-n", "2", "--python", PYTHON,
                            "--prefix", self.dir], env=self.env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("installed kernel gpu2 in", r.stdout)
        self.assertEqual(r.stderr, "", "ipykernel is importable: no warning")
        with open(os.path.join(self.dir, "share", "jupyter", "kernels", "gpu2", "kernel.json")) as f:
            spec = json.load(f)
        self.assertEqual(spec["argv"][:5], [os.path.realpath(BINARY), "run", "-q", "-n", "2"])
        self.assertEqual(spec["argv"][-5:], [PYTHON, "-m", "ipykernel_launcher", "-f", "{connection_file}"])

        d = subprocess.run([PYTHON, "-c", DRIVER, BINARY], env=self.env, capture_output=True, text=True, timeout=180)
        self.assertEqual(d.returncode, 0, d.stderr[-3000:])
        got = json.loads(d.stdout.strip().splitlines()[-1])
        self.assertEqual(len(got["during"]), 1, got)
        lease = got["during"][0]
        self.assertEqual(len(lease["gpus"]), 2)
        uuids, lease_id, port = got["out"].split()
        self.assertEqual(uuids, ",".join(g["uuid"] for g in lease["gpus"]), "the kernel sees its lease's GPUs")
        self.assertEqual(int(lease_id), lease["id"])
        self.assertEqual(int(port), lease["master_port"])
        self.assertEqual(got["after"], [], "a shut-down kernel gave its GPUs back")


if __name__ == "__main__":
    unittest.main()
