#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "render/json_text.h"
#include "render/status_fixtures.h"
#include "render/status_view.h"
#include "support/golden.h"

namespace gpuman::render {
namespace {

using namespace testing_fixtures;
using json = nlohmann::ordered_json;
using test_support::MatchesGolden;

// The text `status --json` prints, and the document it parses to, printed again.
TEST(StatusJsonGoldenTest, FourGpuMachine) {
  EXPECT_TRUE(MatchesGolden("render/golden/status.json",
                            StatusJsonText(FourGpuMachine(), {}, JsonWriter::Style::kPretty) + "\n"));
  EXPECT_TRUE(MatchesGolden("render/golden/status.json", PrettyJson(StatusToJson(FourGpuMachine(), {})) + "\n"));
}

TEST(StatusJsonGoldenTest, SimulatedWithoutProcesses) {
  StatusOptions opts;
  opts.simulated = true;
  opts.scenario = "busy-node";
  opts.show_processes = false;
  EXPECT_TRUE(MatchesGolden("render/golden/status_simulated_no_processes.json",
                            StatusJsonText(FourGpuMachine(), opts, JsonWriter::Style::kPretty) + "\n"));
  EXPECT_TRUE(MatchesGolden("render/golden/status_simulated_no_processes.json",
                            PrettyJson(StatusToJson(FourGpuMachine(), opts)) + "\n"));
}

// The members `status --json` ends with: where the status came from.
TEST(StatusJsonTest, SourceMembersComeLast) {
  const StatusJsonSource daemon{"daemon", 1700000000123, ""};
  json j = json::parse(StatusJsonText(FourGpuMachine(), {}, JsonWriter::Style::kPretty, &daemon));
  ASSERT_GE(j.size(), 3u);
  auto it = j.end();
  EXPECT_EQ((--it).key(), "source_note");
  EXPECT_TRUE(it.value().is_null());
  EXPECT_EQ((--it).key(), "sampled_at_unix_ms");
  EXPECT_EQ(it.value(), 1700000000123);
  EXPECT_EQ((--it).key(), "source");
  EXPECT_EQ(it.value(), "daemon");
  const StatusJsonSource nvml{"nvml", 5, "no daemon at /run/gpuman/gpuman.sock"};
  j = json::parse(StatusJsonText(FourGpuMachine(), {}, JsonWriter::Style::kCompact, &nvml));
  EXPECT_EQ(j["source"], "nvml");
  EXPECT_EQ(j["source_note"], "no daemon at /run/gpuman/gpuman.sock");
  EXPECT_FALSE(json::parse(StatusJsonText(FourGpuMachine(), {}, JsonWriter::Style::kCompact)).contains("source"));
}

TEST(StatusJsonTest, DrainIsNullOrWhoWhyAndSince) {
  StatusOptions opts;
  opts.drains = {{"GPU-8e0b7a42-11aa-4c3d-9e8f-7a6b5c4d3e2f", "health: Xid 79", 0, "root", 1714560000000}};
  const json j = StatusToJson(FourGpuMachine(), opts);
  ASSERT_EQ(j["gpus"].size(), 4u);
  EXPECT_TRUE(j["gpus"][0]["drain"].is_null());
  EXPECT_EQ(j["gpus"][1]["drain"],
            json::parse(R"({"reason":"health: Xid 79","by":"root","by_uid":0,"since_unix_ms":1714560000000})"));
  EXPECT_TRUE(j["gpus"][2]["drain"].is_null());
  // Every GPU has the key, drained or not, with or without drains known.
  // (The document is held in a variable: a range-for over a member of a temporary would
  // iterate freed memory.)
  const json none_known = StatusToJson(FourGpuMachine(), {});
  ASSERT_EQ(none_known["gpus"].size(), 4u);
  for (const auto& g : none_known["gpus"]) {
    ASSERT_TRUE(g.contains("drain"));
    EXPECT_TRUE(g["drain"].is_null());
  }
}

TEST(StatusJsonTest, TopLevel) {
  const json j = StatusToJson(FourGpuMachine(), {});
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["simulated"], false);
  EXPECT_FALSE(j.contains("scenario"));
  EXPECT_EQ(j["driver_version"], "550.54.15");
  EXPECT_EQ(j["nvml_version"], "12.550.54.15");
  EXPECT_EQ(j["cuda_driver_version"], "12.4");
  EXPECT_EQ(j["timestamp"], "2024-05-01T12:00:00.250Z");
  ASSERT_EQ(j["gpus"].size(), 4u);
}

TEST(StatusJsonTest, SimulatedAddsScenario) {
  StatusOptions opts;
  opts.simulated = true;
  opts.scenario = "busy-node";
  const json j = StatusToJson(FourGpuMachine(), opts);
  EXPECT_EQ(j["simulated"], true);
  EXPECT_EQ(j["scenario"], "busy-node");
}

TEST(StatusJsonTest, UnknownSystemInfoIsNull) {
  model::MachineSnapshot snap;
  const json j = StatusToJson(snap, {});
  EXPECT_TRUE(j["driver_version"].is_null());
  EXPECT_TRUE(j["nvml_version"].is_null());
  EXPECT_TRUE(j["cuda_driver_version"].is_null());
  EXPECT_TRUE(j["gpus"].is_array());
  EXPECT_TRUE(j["gpus"].empty());
}

TEST(StatusJsonTest, KnownGpuFields) {
  const json g = StatusToJson(FourGpuMachine(), {})["gpus"][0];
  EXPECT_EQ(g["index"], 0);
  EXPECT_EQ(g["uuid"], "GPU-3f2a9c1d-5b6e-4f70-8a91-0c2d3e4f5a6b");
  EXPECT_EQ(g["name"], "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(g["memory"]["total_bytes"], 80 * kGiB);
  EXPECT_EQ(g["memory"]["reserved_bytes"], 0);  // known zero stays zero
  EXPECT_EQ(g["utilization"]["gpu_percent"], 0);
  EXPECT_EQ(g["performance_state"], "P0");
  EXPECT_EQ(g["compute_capability"], "8.0");
  EXPECT_EQ(g["mig_mode"]["current"], false);
  EXPECT_EQ(g["clock_event_reasons"]["mask"], 1);
  EXPECT_EQ(g["clock_event_reasons"]["active"], json::array({"gpu_idle"}));
  EXPECT_EQ(g["cpu_affinity"], "0-15");
  EXPECT_EQ(g["numa_node"], 0);
  EXPECT_EQ(g["healthy"], true);
  EXPECT_EQ(g["health_problems"], json::array());
  EXPECT_EQ(g["processes"], json::array());
}

TEST(StatusJsonTest, LostGpuIsUnhealthyWithNulls) {
  const json g = StatusToJson(FourGpuMachine(), {})["gpus"][2];
  EXPECT_EQ(g["index"], 2);
  EXPECT_EQ(g["healthy"], false);
  EXPECT_EQ(g["health_problems"], json::array({"nvmlDeviceGetMemoryInfo_v2: GPU is lost"}));
  for (const char* key : {"serial", "temperature_c", "power_usage_w", "power_limit_w",
                          "fan_percent", "performance_state", "compute_capability",
                          "compute_mode", "persistence_mode", "retired_pages_pending",
                          "clock_event_reasons", "cpu_affinity", "numa_node"}) {
    EXPECT_TRUE(g[key].is_null()) << key;
  }
  for (const char* key : {"total_bytes", "used_bytes", "free_bytes", "reserved_bytes"}) {
    EXPECT_TRUE(g["memory"][key].is_null()) << key;
  }
  EXPECT_TRUE(g["utilization"]["gpu_percent"].is_null());
  EXPECT_TRUE(g["clocks"]["sm_mhz"].is_null());
  EXPECT_TRUE(g["mig_mode"]["pending"].is_null());
  EXPECT_TRUE(g["ecc"]["volatile_uncorrected"].is_null());
  EXPECT_TRUE(g["remapped_rows"]["failure"].is_null());
}

TEST(StatusJsonTest, Processes) {
  const json procs = StatusToJson(FourGpuMachine(), {})["gpus"][1]["processes"];
  ASSERT_EQ(procs.size(), 3u);
  EXPECT_EQ(procs[0]["pid"], 41234);
  EXPECT_EQ(procs[0]["user"], "alice");
  EXPECT_EQ(procs[0]["uid"], 1001);
  EXPECT_EQ(procs[0]["in_pid_namespace"], true);
  EXPECT_EQ(procs[0]["type"], "compute");
  EXPECT_EQ(procs[0]["start_time"], "2024-05-01T09:47:00Z");
  EXPECT_TRUE(procs[0]["gpu_instance_id"].is_null());

  const json& foreign = procs[1];
  EXPECT_EQ(foreign["pid"], 7);
  EXPECT_EQ(foreign["in_pid_namespace"], false);
  for (const char* key : {"user", "uid", "command", "start_time"}) {
    EXPECT_TRUE(foreign[key].is_null()) << key;
  }
  EXPECT_EQ(foreign["used_memory_bytes"], 20 * kGiB);

  const json sparse = StatusToJson(FourGpuMachine(), {})["gpus"][3]["processes"][0];
  EXPECT_TRUE(sparse["used_memory_bytes"].is_null());
  EXPECT_TRUE(sparse["user"].is_null());
  EXPECT_EQ(sparse["uid"], 1234);
  EXPECT_EQ(sparse["type"], "compute+graphics");
}

TEST(StatusJsonTest, ShowProcessesFalseOmitsTheKey) {
  StatusOptions opts;
  opts.show_processes = false;
  const json doc = StatusToJson(FourGpuMachine(), opts);  // held, as in DrainIsNullOrWhoWhyAndSince
  ASSERT_EQ(doc["gpus"].size(), 4u);
  for (const json& g : doc["gpus"]) {
    EXPECT_FALSE(g.contains("processes"));
  }
}

TEST(StatusJsonTest, MigIds) {
  model::MachineSnapshot snap = FourGpuMachine();
  model::GpuProcess p;
  p.pid = 99;
  p.gpu_instance_id = 1;
  p.compute_instance_id = 0;
  snap.gpus[0].processes = {p};
  const json j = StatusToJson(snap, {})["gpus"][0]["processes"][0];
  EXPECT_EQ(j["gpu_instance_id"], 1);
  EXPECT_EQ(j["compute_instance_id"], 0);
}

// MPS leases (docs/json.md "Lease member"): "mps" and "gpu_share_percent" on the whole-GPU
// lease, on each slice and on a MIG device's lease.
TEST(StatusJsonTest, LeasesSayMpsAndTheirThreadShare) {
  const model::MachineSnapshot snap = MigMachine();
  model::Lease mig;
  mig.id = 7;
  mig.user = "alice";
  mig.kind = "run";
  mig.gpu_uuids = {*snap.gpus[0].mig_devices[1].uuid};
  model::Lease slice = mig;
  slice.id = 8;
  slice.user = "bob";
  slice.gpu_uuids = {*snap.gpus[1].uuid};
  slice.gpu_memory_bytes = int64_t{20} << 30;
  slice.mps = true;
  slice.gpu_share_percent = 25;
  model::Lease whole = mig;
  whole.id = 9;
  whole.gpu_uuids = {*snap.gpus[2].uuid};
  whole.mps = true;
  StatusOptions opts;
  opts.leases = {mig, slice, whole};
  const json j = StatusToJson(snap, opts);
  const json& s = j["gpus"][1]["slices"].at(0);
  EXPECT_EQ(s["lease_id"], 8);
  EXPECT_EQ(s["mps"], true);
  EXPECT_EQ(s["gpu_share_percent"], 25);
  const json& w = j["gpus"][2]["lease"];
  EXPECT_EQ(w["id"], 9);
  EXPECT_EQ(w["mps"], true);
  EXPECT_TRUE(w["gpu_share_percent"].is_null());
  const json& m = j["gpus"][0]["mig_devices"][1]["lease"];
  EXPECT_EQ(m["id"], 7);
  EXPECT_EQ(m["mps"], false);
  EXPECT_TRUE(m.contains("gpu_share_percent"));
  EXPECT_TRUE(m["gpu_share_percent"].is_null());
  EXPECT_TRUE(j["gpus"][0]["mig_devices"][0]["lease"].is_null());
}

}  // namespace
}  // namespace gpuman::render
