// The device snapshot's wire form (protocol/model_json.h): every field of MachineSnapshot,
// DeviceSnapshot, GpuProcess and Topology survives a trip through JSON text, and a wrong
// shape is one precise error.
#include "protocol/model_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "protocol/json_io.h"
#include "protocol/messages.h"
#include "protocol_samples.h"

namespace gpuman::protocol {
namespace {

using nlohmann::json;
using testing_samples::FullGpu;
using testing_samples::FullSnapshot;

// Through text, as on the wire.
model::MachineSnapshot RoundTrip(const model::MachineSnapshot& snap) {
  Result<json> text = ParseJson(DumpJson(MachineSnapshotToJson(snap)));
  EXPECT_TRUE(text);
  Result<model::MachineSnapshot> back = MachineSnapshotFromJson(*text);
  EXPECT_TRUE(back) << back.error().message;
  return back ? *back : model::MachineSnapshot{};
}

#define EXPECT_FIELD(field) EXPECT_EQ(got.field, want.field) << #field

void ExpectSameProcess(const model::GpuProcess& got, const model::GpuProcess& want) {
  EXPECT_FIELD(pid);
  EXPECT_FIELD(type);
  EXPECT_FIELD(used_memory_bytes);
  EXPECT_FIELD(gpu_instance_id);
  EXPECT_FIELD(compute_instance_id);
  EXPECT_FIELD(is_visible);
  EXPECT_FIELD(uid);
  EXPECT_FIELD(user);
  EXPECT_FIELD(command);
  EXPECT_FIELD(start_time_unix);
  EXPECT_FIELD(sm_util_percent);
}

void ExpectSameGpu(const model::DeviceSnapshot& got, const model::DeviceSnapshot& want) {
  EXPECT_FIELD(index);
  EXPECT_FIELD(uuid);
  EXPECT_FIELD(name);
  EXPECT_FIELD(pci_bus_id);
  EXPECT_FIELD(serial);
  EXPECT_FIELD(minor_number);
  EXPECT_FIELD(memory_total_bytes);
  EXPECT_FIELD(memory_used_bytes);
  EXPECT_FIELD(memory_free_bytes);
  EXPECT_FIELD(memory_reserved_bytes);
  EXPECT_FIELD(gpu_utilization_percent);
  EXPECT_FIELD(memory_utilization_percent);
  EXPECT_FIELD(temperature_c);
  EXPECT_FIELD(power_usage_w);
  EXPECT_FIELD(power_limit_w);
  EXPECT_FIELD(fan_percent);
  EXPECT_FIELD(clocks.sm_mhz);
  EXPECT_FIELD(clocks.sm_max_mhz);
  EXPECT_FIELD(clocks.memory_mhz);
  EXPECT_FIELD(clocks.memory_max_mhz);
  EXPECT_FIELD(performance_state);
  EXPECT_FIELD(compute_capability);
  EXPECT_FIELD(cuda_cores);
  EXPECT_FIELD(memory_bus_width_bits);
  EXPECT_FIELD(fabric_state);
  EXPECT_FIELD(compute_mode);
  EXPECT_FIELD(persistence_mode);
  EXPECT_FIELD(mig_mode_current);
  EXPECT_FIELD(mig_mode_pending);
  EXPECT_FIELD(ecc_volatile_corrected);
  EXPECT_FIELD(ecc_volatile_uncorrected);
  EXPECT_FIELD(ecc_aggregate_corrected);
  EXPECT_FIELD(ecc_aggregate_uncorrected);
  EXPECT_FIELD(retired_pages_pending);
  EXPECT_FIELD(remapped_rows_pending);
  EXPECT_FIELD(remapped_rows_failure);
  EXPECT_FIELD(clock_event_reasons);
  EXPECT_FIELD(cpu_affinity);
  EXPECT_FIELD(numa_node);
  EXPECT_FIELD(is_healthy);
  EXPECT_FIELD(health_problems);
  EXPECT_FIELD(warnings);
  ASSERT_EQ(got.mig_devices.size(), want.mig_devices.size());
  for (size_t i = 0; i < got.mig_devices.size(); ++i) {
    const model::MigDevice& a = got.mig_devices[i];
    const model::MigDevice& b = want.mig_devices[i];
    EXPECT_EQ(a.index, b.index);
    EXPECT_EQ(a.uuid, b.uuid);
    EXPECT_EQ(a.parent_uuid, b.parent_uuid);
    EXPECT_EQ(a.parent_index, b.parent_index);
    EXPECT_EQ(a.gpu_instance_id, b.gpu_instance_id);
    EXPECT_EQ(a.compute_instance_id, b.compute_instance_id);
    EXPECT_EQ(a.gpu_slices, b.gpu_slices);
    EXPECT_EQ(a.compute_slices, b.compute_slices);
    EXPECT_EQ(a.multiprocessors, b.multiprocessors);
    EXPECT_EQ(a.profile, b.profile);
    EXPECT_EQ(a.memory_total_bytes, b.memory_total_bytes);
    EXPECT_EQ(a.memory_used_bytes, b.memory_used_bytes);
    ASSERT_EQ(a.processes.size(), b.processes.size());
  }
  ASSERT_EQ(got.processes.size(), want.processes.size());
  for (size_t i = 0; i < got.processes.size(); ++i) {
    SCOPED_TRACE("process " + std::to_string(i));
    ExpectSameProcess(got.processes[i], want.processes[i]);
  }
}

TEST(SnapshotJsonTest, EveryFieldSurvives) {
  const model::MachineSnapshot want = FullSnapshot();
  const model::MachineSnapshot got = RoundTrip(want);
  EXPECT_FIELD(system.driver_version);
  EXPECT_FIELD(system.nvml_version);
  EXPECT_FIELD(system.cuda_driver_version);
  EXPECT_FIELD(taken_at_unix_ms);
  ASSERT_TRUE(got.topology.has_value());
  EXPECT_EQ(got.topology->nvlinks, want.topology->nvlinks);
  EXPECT_EQ(got.topology->pcie, want.topology->pcie);
  ASSERT_EQ(got.gpus.size(), want.gpus.size());
  for (size_t i = 0; i < got.gpus.size(); ++i) {
    SCOPED_TRACE("gpu " + std::to_string(i));
    ExpectSameGpu(got.gpus[i], want.gpus[i]);
  }
}

// Unknown stays unknown: a GPU the driver said nothing about comes back with every
// optional empty (null on the wire, never 0 or false), and no topology appears.
// The daemon splices a snapshot it encoded once into each reply: the text is the one the
// whole result's dump would be, with other members present or empty.
TEST(SnapshotJsonTest, EncodedSnapshotResultIsTheResultsDump) {
  protocol::SnapshotResult full;
  full.snapshot = FullSnapshot();
  full.sample_interval_ms = 1000;
  full.scenario = "h100-8";
  full.leases = {testing_samples::FullLease()};
  full.jobs = {testing_samples::FullJob()};
  full.drains = {model::GpuDrain{"GPU-1", "fan", 0, "root", 5}};
  for (const protocol::SnapshotResult& with : {full, protocol::SnapshotResult{FullSnapshot(), "", 0, {}, {}, {}, {}}}) {
    protocol::SnapshotResult without = with;
    without.snapshot.reset();
    EXPECT_EQ(protocol::EncodeSnapshotResult(without, DumpJson(MachineSnapshotToJson(*with.snapshot))),
              DumpJson(protocol::ToJson(with)));
  }
}

TEST(SnapshotJsonTest, UnknownStaysUnknown) {
  model::MachineSnapshot want;
  model::DeviceSnapshot bare;
  bare.index = 5;
  bare.is_healthy = false;
  model::GpuProcess p;
  p.pid = 9;
  bare.processes = {p};
  want.gpus = {bare};
  const json j = MachineSnapshotToJson(want);
  EXPECT_TRUE(j["gpus"][0]["memory_total_bytes"].is_null());
  EXPECT_TRUE(j["gpus"][0]["processes"][0]["user"].is_null());
  EXPECT_FALSE(j.contains("topology"));
  const model::MachineSnapshot got = RoundTrip(want);
  EXPECT_FALSE(got.topology.has_value());
  ASSERT_EQ(got.gpus.size(), 1u);
  ExpectSameGpu(got.gpus[0], bare);
}

// A guard for the next person who adds a field: these sizes change with it. Add the field
// to MachineSnapshotToJson/FromJson (src/protocol/model_json.cc), to FullGpu() and to the
// checks above, then update the size here.
TEST(SnapshotJsonTest, EveryFieldIsListedHere) {
  EXPECT_EQ(sizeof(model::DeviceSnapshot), 768u) << "DeviceSnapshot changed: serialize the new field";
  EXPECT_EQ(sizeof(model::GpuProcess), 160u) << "GpuProcess changed: serialize the new field";
}

TEST(SnapshotJsonTest, WrongShapesArePreciseErrors) {
  json j = MachineSnapshotToJson(FullSnapshot());
  j["gpus"][1]["memory_total_bytes"] = "lots";
  auto bad = MachineSnapshotFromJson(j, "result.snapshot");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.error().message, "result.snapshot.gpus[1].memory_total_bytes: expected 64-bit integer");

  json p = MachineSnapshotToJson(FullSnapshot());
  p["gpus"][0]["processes"][0]["type"] = "quantum";
  auto bad_type = MachineSnapshotFromJson(p);
  ASSERT_FALSE(bad_type);
  EXPECT_NE(bad_type.error().message.find("snapshot.gpus[0].processes[0].type: unknown process type 'quantum'"),
            std::string::npos)
      << bad_type.error().message;

  json n = MachineSnapshotToJson(FullSnapshot());
  n["gpus"][0]["clock_event_reasons"] = -1;
  EXPECT_FALSE(MachineSnapshotFromJson(n));
  n = MachineSnapshotToJson(FullSnapshot());
  n["gpus"][0].erase("index");
  auto no_index = MachineSnapshotFromJson(n);
  ASSERT_FALSE(no_index);
  EXPECT_EQ(no_index.error().message, "snapshot.gpus[0].index: missing");
}

}  // namespace
}  // namespace gpuman::protocol

namespace gpuman::protocol {
namespace {

// `--prefer fastest` with what `gpuman bench` measured travels to the daemon; a figure
// that is no positive number is one precise error.
TEST(GpuRequestJsonTest, MeasuredFiguresTravelWithThePreference) {
  model::GpuRequest req;
  req.prefer_fastest = true;
  req.measured_fp32_tflops = {{"GPU-a", 40.5}, {"GPU-b", 20}};
  Result<json> text = ParseJson(DumpJson(GpuRequestToJson(req)));
  ASSERT_TRUE(text);
  auto back = GpuRequestFromJson(*text);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_TRUE(back->prefer_fastest);
  EXPECT_EQ(back->measured_fp32_tflops, req.measured_fp32_tflops);
  EXPECT_FALSE(GpuRequestToJson(model::GpuRequest{}).contains("measured_fp32_tflops"));  // absent when none

  json bad = *text;
  bad["measured_fp32_tflops"]["GPU-a"] = -1;
  auto refused = GpuRequestFromJson(bad);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("measured_fp32_tflops"), std::string::npos) << refused.error().message;
  bad["measured_fp32_tflops"] = "fast";
  EXPECT_FALSE(GpuRequestFromJson(bad));
}

}  // namespace
}  // namespace gpuman::protocol
