#include "cli/bench_command.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "cli/acquire.h"
#include "cli/bench_store.h"
#include "cuda/bench.h"
#include "cuda/library.h"
#include "model/peak.h"

namespace gpuman::cli {
namespace {

using json = nlohmann::json;

std::string Fixed1(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}
double Round1(double v) { return std::round(v * 10) / 10; }

struct Row {
  int index = 0;
  std::string uuid, name;
  std::optional<cuda::Measurement> measured;
  std::string error;
  model::PeakFigures peak;
};

// The lease `bench` holds while it measures, given back on every way out.
class HeldLease {
 public:
  HeldLease(Context& ctx, Acquired acquired) : ctx_(ctx), acquired_(std::move(acquired)) {}
  ~HeldLease() {
    if (acquired_.nested) return;
    if (auto r = ReleaseLease(ctx_, acquired_.lease.id); !r && r.error().code != ErrorCode::kNotFound) {
      ctx_.err() << "gpuman: warning: releasing lease " << acquired_.lease.id << ": " << r.error().message << "\n";
    }
  }
  HeldLease(const HeldLease&) = delete;
  HeldLease& operator=(const HeldLease&) = delete;
  const Acquired& acquired() const { return acquired_; }

 private:
  Context& ctx_;
  Acquired acquired_;
};

}  // namespace

int RunBench(const BenchArgs& args, Context& ctx) {
  // The library first: without it there is nothing to do, and no lease is taken.
  const std::string lib_path = ctx.env().Get("GPUMAN_CUDA_LIBRARY").value_or("").empty()
                                   ? std::string("libcuda.so.1")
                                   : *ctx.env().Get("GPUMAN_CUDA_LIBRARY");
  auto lib = cuda::CudaLibrary::Load(lib_path);
  if (!lib) return ctx.Fail(lib.error());

  auto source = ctx.Devices();
  if (!source) return ctx.Fail(source.error());
  auto snap = (*source)->Snapshot();
  if (!snap) return ctx.Fail(snap.error());

  // Which GPUs: those named, else every GPU of the machine; one lease on all of them, taken
  // as `run` takes one (the daemon's or the machine lease table's rules), never waiting.
  SelectionArgs selection;
  if (args.gpus) {
    SelectionArgs probe;
    probe.gpus = args.gpus;
    auto req = BuildSelectionRequest(probe, *snap, ctx.env().vars);
    if (!req) return ctx.Fail(req.error());
    if (!req->gpus || req->gpus->empty()) {
      return ctx.Fail(MakeError(ErrorCode::kInvalidArgument, "bench: --gpus names no GPU"));
    }
    selection.gpus = Join(*req->gpus, ",");
    selection.count = static_cast<int>(req->gpus->size());
  } else {
    std::vector<std::string> all;
    for (const auto& g : snap->gpus) {
      if (g.uuid) all.push_back(*g.uuid);
    }
    if (all.empty()) return ctx.Fail(MakeError(ErrorCode::kNotFound, "bench: this machine has no GPU"));
    selection.gpus = Join(all, ",");
    selection.count = static_cast<int>(all.size());
  }
  // A lease of kind "run" held by this process, as `run`'s runner holds one: `leases`
  // shows it as "gpuman bench", and a daemon that confines runs confines it too.
  auto draft = DraftLease(ctx, getpid(), "run", "gpuman bench");
  if (!draft) return ctx.Fail(draft.error());
  auto acquired = AcquireLease(ctx, selection, *draft, AcquireOptions{});
  if (!acquired) {
    Error error = acquired.error();
    if (!args.gpus && (error.code == ErrorCode::kBusy || error.code == ErrorCode::kNotFound)) {
      error.message += "; bench measures every GPU unless --gpus names some";
    }
    return ctx.Fail(error);
  }
  HeldLease lease(ctx, std::move(*acquired));
  const auto& uuids = lease.acquired().selection.uuids;

  // CUDA sees exactly the leased GPUs (set before cuInit, which reads it once).
  ::setenv("CUDA_VISIBLE_DEVICES", Join(uuids, ",").c_str(), 1);
  ::setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
  if (auto st = (*lib)->Init(); !st) return ctx.Fail(st.error());
  auto devices = cuda::ListDevices(**lib);
  if (!devices) return ctx.Fail(devices.error());

  std::vector<Row> rows;
  for (const std::string& uuid : uuids) {
    Row row;
    row.uuid = uuid;
    for (const auto& g : snap->gpus) {
      if (g.uuid == uuid) {
        row.index = g.index;
        row.name = g.name.value_or("");
        row.peak = model::PeakOf(g);
      }
    }
    const cuda::CudaDevice* dev = nullptr;
    for (const auto& d : *devices) {
      if (d.uuid == uuid) dev = &d;
    }
    if (dev == nullptr) {
      row.error = "CUDA does not see it (CUDA_VISIBLE_DEVICES=" + Join(uuids, ",") + ")";
    } else {
      if (row.name.empty()) row.name = dev->name;
      auto m = cuda::MeasureDevice(**lib, dev->ordinal);
      if (m) row.measured = *m;
      else row.error = m.error().message;
    }
    rows.push_back(std::move(row));
  }

  // Store what was measured, over what the file held for the same GPUs.
  const BenchPaths paths = BenchFilePaths(ctx.env(), getuid());
  const std::string cuda_version = cuda::CudaDriverVersion(**lib).value_or("");
  bool stored = false;
  std::optional<Error> store_error;
  if (paths.write.empty()) {
    store_error = MakeError(ErrorCode::kIo, "bench: nowhere to store the figures (set HOME or XDG_CACHE_HOME)");
  } else {
    auto records = ReadBenchFile(paths.write);
    if (!records) {
      store_error = records.error();
    } else {
      for (const Row& row : rows) {
        if (!row.measured) continue;
        BenchRecord r;
        r.uuid = row.uuid;
        r.name = row.name;
        r.fp32_tflops = row.measured->fp32_tflops;
        r.memory_gbps = row.measured->memory_gbps;
        r.measured_unix_ms = ctx.clock().NowUnixMs();
        r.driver_version = snap->system.driver_version.value_or("");
        r.cuda_version = cuda_version;
        (*records)[row.uuid] = r;
        stored = true;
      }
      if (stored) {
        if (auto st = WriteBenchFile(paths.write, *records); !st) {
          store_error = st.error();
          stored = false;
        }
      }
    }
  }

  bool failed = false;
  if (args.json) {
    json out{{"file", stored ? json(paths.write) : json(nullptr)},
             {"driver_version", snap->system.driver_version ? json(*snap->system.driver_version) : json(nullptr)},
             {"cuda_version", cuda_version.empty() ? json(nullptr) : json(cuda_version)},
             {"gpus", json::array()}};
    for (const Row& row : rows) {
      auto opt = [](std::optional<double> v) { return v ? json(Round1(*v)) : json(nullptr); };
      json g{{"index", row.index},
             {"uuid", row.uuid},
             {"name", row.name},
             {"fp32_tflops", row.measured ? json(Round1(row.measured->fp32_tflops)) : json(nullptr)},
             {"memory_gbps", row.measured ? json(Round1(row.measured->memory_gbps)) : json(nullptr)},
             {"peak_fp32_tflops", opt(row.peak.fp32_tflops)},
             {"peak_memory_gbps", opt(row.peak.memory_gbps)},
             {"error", row.error.empty() ? json(nullptr) : json(row.error)}};
      out["gpus"].push_back(std::move(g));
    }
    ctx.out() << out.dump(2) << "\n";
  } else {
    size_t name_w = 4;
    for (const Row& row : rows) name_w = std::max(name_w, row.name.size());
    auto pad = [](std::string s, size_t w) {
      if (s.size() < w) s.append(w - s.size(), ' ');
      return s;
    };
    auto fig = [](std::optional<double> v) { return v ? Fixed1(*v) : std::string("-"); };
    ctx.out() << pad("GPU", 4) << pad("NAME", name_w + 2) << pad("FP32 TFLOPS", 13) << pad("PEAK", 8)
              << pad("MEMORY GB/s", 13) << "PEAK\n";
    for (const Row& row : rows) {
      ctx.out() << pad(std::to_string(row.index), 4) << pad(row.name, name_w + 2);
      if (row.measured) {
        ctx.out() << pad(Fixed1(row.measured->fp32_tflops), 13) << pad(fig(row.peak.fp32_tflops), 8)
                  << pad(Fixed1(row.measured->memory_gbps), 13) << fig(row.peak.memory_gbps) << "\n";
      } else {
        ctx.out() << "not measured: " << row.error << "\n";
      }
    }
    if (stored) {
      ctx.out() << "stored in " << paths.write
                << (paths.write == kMachineBenchFile ? " (every user's --prefer fastest ranks by it)"
                                                      : " (your own --prefer fastest ranks by it)")
                << "\n";
    }
  }
  for (const Row& row : rows) {
    if (row.measured) continue;
    ctx.err() << "gpuman: error: GPU " << row.index << " (" << row.uuid << "): " << row.error << "\n";
    failed = true;
  }
  if (store_error) {
    ctx.err() << "gpuman: error: " << store_error->message << "\n";
    failed = true;
  }
  return failed ? kExitError : kExitOk;
}

}  // namespace gpuman::cli
