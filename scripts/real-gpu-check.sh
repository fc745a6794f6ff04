#!/usr/bin/env bash
# Compares `gpuman status --json` with nvidia-smi on a machine with a real NVIDIA GPU,
# field by field, and prints a table of matches and differences. Needs python3.
# Usage: scripts/real-gpu-check.sh [path/to/gpuman]
set -euo pipefail
cd "$(dirname "$0")/.."
GPUMAN=${1:-build/gpuman}
out=${OUT:-/tmp}
"$GPUMAN" status --json > "$out/gpuman.json"
nvidia-smi --query-gpu=index,uuid,name,pci.bus_id,serial,memory.total,memory.used,memory.free,memory.reserved,utilization.gpu,utilization.memory,temperature.gpu,power.draw,power.limit,fan.speed,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,pstate,compute_cap,compute_mode,persistence_mode,mig.mode.current,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total,driver_version \
  --format=csv,noheader,nounits > "$out/smi-gpu.csv" || true
nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory,process_name --format=csv,noheader,nounits > "$out/smi-apps.csv" || true
python3 - "$out" <<'PY'
import csv, json, sys
out = sys.argv[1]
g = json.load(open(f"{out}/gpuman.json"))
rows = list(csv.reader(open(f"{out}/smi-gpu.csv"), skipinitialspace=True))
MiB = 1024 * 1024
def num(s):
    try: return float(s)
    except ValueError: return None
checks = 0; diffs = 0
for row in rows:
    idx = int(row[0]); gpu = next(x for x in g["gpus"] if x["index"] == idx)
    pairs = [
      ("uuid", row[1], gpu["uuid"]), ("name", row[2], gpu["name"]),
      ("pci_bus_id", row[3].upper(), (gpu["pci_bus_id"] or "").upper()),
      ("serial", row[4], gpu["serial"]),
      ("memory.total MiB", num(row[5]), gpu["memory"]["total_bytes"] and gpu["memory"]["total_bytes"] // MiB),
      ("memory.used MiB", num(row[6]), gpu["memory"]["used_bytes"] is not None and gpu["memory"]["used_bytes"] // MiB),
      ("memory.free MiB", num(row[7]), gpu["memory"]["free_bytes"] is not None and gpu["memory"]["free_bytes"] // MiB),
      ("memory.reserved MiB", num(row[8]), gpu["memory"]["reserved_bytes"] is not None and gpu["memory"]["reserved_bytes"] // MiB),
      ("utilization.gpu", num(row[9]), gpu["utilization"]["gpu_percent"]),
      ("temperature", num(row[11]), gpu["temperature_c"]),
      ("power.draw W", num(row[12]), gpu["power_usage_w"]),
      ("power.limit W", num(row[13]), gpu["power_limit_w"]),
      ("fan %", num(row[14]), gpu["fan_percent"]),
      ("clocks.max.sm", num(row[16]), gpu["clocks"]["sm_max_mhz"]),
      ("clocks.max.mem", num(row[18]), gpu["clocks"]["memory_max_mhz"]),
      ("pstate", row[19], gpu["performance_state"]),
      ("compute_cap", row[20], gpu["compute_capability"]),
      ("persistence", row[22], {True: "Enabled", False: "Disabled", None: None}[gpu["persistence_mode"]]),
      ("ecc.uncorrected.volatile", num(row[25]), gpu["ecc"]["volatile_uncorrected"]),
      ("driver_version", row[26], g["driver_version"]),
    ]
    for name, smi, ours in pairs:
        checks += 1
        same = smi == ours
        if isinstance(smi, float) and isinstance(ours, (int, float)) and not isinstance(ours, bool):
            same = abs(smi - ours) <= max(1.0, 0.02 * abs(smi))  # live values move between calls
        if smi is None and ours is None: same = True
        diffs += not same
        print(f"GPU {idx} {name:26} nvidia-smi={smi!s:42} gpuman={ours!s:42} {'ok' if same else 'DIFF'}")
apps = list(csv.reader(open(f"{out}/smi-apps.csv"), skipinitialspace=True))
ours = {(gpu["uuid"], p["pid"]) for gpu in g["gpus"] for p in gpu.get("processes", [])}
for a in apps:
    if not a: continue
    checks += 1; ok = (a[0], int(a[1])) in ours; diffs += not ok
    print(f"process {a[1]} on {a[0]}: {'ok' if ok else 'MISSING in gpuman'}")
print(f"{checks} checks, {diffs} differences")
PY

# Health and the daemon's monitoring against the real driver: `health --local` (kernel
# log + one snapshot), then a user-mode daemon for a few seconds (NVML event registration,
# /metrics, history rows).
set +e
"$GPUMAN" health --local --json > "$out/health.json"; echo "health --local exit $?"
sock="$out/gpuman.sock"; state="$out/daemon-state"
"$GPUMAN" daemon --socket "$sock" --state-dir "$state" --metrics 127.0.0.1:9477 2> "$out/daemon.err" &
dpid=$!
sleep 6
GPUMAN_SOCKET="$sock" "$GPUMAN" health --json > "$out/health-daemon.json"; echo "health via daemon exit $?"
python3 - "$out" <<'PY'
import json, sys, urllib.request
out = sys.argv[1]
h = json.load(open(f"{out}/health-daemon.json"))
print("xid sources:", h["xid_sources"], "notes:", h["notes"])
text = urllib.request.urlopen("http://127.0.0.1:9477/metrics", timeout=5).read().decode()
open(f"{out}/metrics.txt", "w").write(text)
print("metrics lines:", len(text.splitlines()), "gpu_memory_total samples:", sum(l.startswith("gpuman_gpu_memory_total_bytes") for l in text.splitlines()))
PY
GPUMAN_HISTORY_DB="$state/history.db" "$GPUMAN" history --csv | head -5
kill "$dpid"; wait "$dpid"

# `gpuman bench` against the driver's real libcuda.so.1 (docs/cli.md): the PTX kernels
# compile and run, the figures sit below the computed peaks, and `--prefer fastest` reads
# them back. Stored in $out, not the machine's file.
export GPUMAN_BENCH_FILE="$out/bench.json"
"$GPUMAN" bench --json > "$out/bench-out.json"; echo "bench exit $?"
"$GPUMAN" bench; echo "bench (text) exit $?"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
b = json.load(open(f"{out}/bench-out.json"))
for g in b["gpus"]:
    ratio = lambda m, p: f"{100 * m / p:.0f}% of peak" if m and p else "no peak"
    print(f"GPU {g['index']} {g['name']}: {g['fp32_tflops']} TFLOPS ({ratio(g['fp32_tflops'], g['peak_fp32_tflops'])}), "
          f"{g['memory_gbps']} GB/s ({ratio(g['memory_gbps'], g['peak_memory_gbps'])}), error: {g['error']}")
print("stored:", sorted(json.load(open(f"{out}/bench.json"))["gpus"]))
PY
"$GPUMAN" select -n 1 --prefer fastest; echo "select --prefer fastest exit $?"
unset GPUMAN_BENCH_FILE
