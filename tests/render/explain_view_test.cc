// The `gpuman explain` views: the JSON contract (keys, order, values, nulls) and the
// text view's width and colour rules.
#include "render/explain_view.h"

#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "render/format.h"

namespace gpuman::render {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kGiB = int64_t{1} << 30;

model::DeviceSnapshot Gpu(int index, const char* uuid, const char* name, const char* cc) {
  model::DeviceSnapshot d;
  d.index = index;
  d.uuid = uuid;
  d.name = name;
  d.pci_bus_id = index == 0 ? "00000000:01:00.0" : index == 1 ? "00000000:21:00.0" : "00000000:41:00.0";
  d.compute_capability = cc;
  d.memory_total_bytes = 24 * kGiB;
  return d;
}

std::vector<model::DeviceSnapshot> Mixed() {
  return {Gpu(0, "GPU-30900000-0000-4000-8000-00000000000a", "NVIDIA GeForce RTX 3090", "8.6"),
          Gpu(1, "GPU-40900000-0000-4000-8000-00000000000b", "NVIDIA GeForce RTX 4090", "8.9"),
          Gpu(2, "GPU-30900000-0000-4000-8000-00000000000c", "NVIDIA GeForce RTX 3090", "8.6")};
}

// A report with every section: layers, a cut list, an estimate, several warnings.
visibility::VisibilityReport Busy() {
  auto gpus = Mixed();
  gpus[1].is_healthy = false;
  gpus[1].health_problems = {"GPU is lost"};
  model::Lease lease;
  lease.id = 7;
  lease.uid = 1001;
  lease.user = "alice";
  lease.command = "python train.py --config configs/a-very-long-experiment-name.yaml";
  lease.gpu_uuids = {"GPU-30900000-0000-4000-8000-00000000000c"};
  const visibility::Environment env{{"SLURM_STEP_GPUS", "1,2"},
                                    {"CUDA_VISIBLE_DEVICES", "0,2,garbage-entry-that-is-long,1"}};
  visibility::ResolveOptions options;
  options.leases = {lease};
  options.current_uid = 1000;
  return visibility::Resolve(env, gpus, options);
}

model::GpuProcess Process(uint32_t pid, uint32_t uid, const char* user, const char* command) {
  model::GpuProcess p;
  p.pid = pid;
  p.is_visible = true;
  p.uid = uid;
  p.user = user;
  p.command = command;
  return p;
}

// Another user on every side of GPU 2 (cuda:1 when CUDA_VISIBLE_DEVICES=0,2): bob's lease
// 12 and a process of carol, plus the caller's own lease and process on GPU 0 (cuda:0).
visibility::VisibilityReport Shared(std::optional<std::string> leases_error = std::nullopt) {
  auto gpus = Mixed();
  gpus[2].processes = {Process(4242, 1003, "carol", "python train.py --epochs 90")};
  gpus[0].processes = {Process(4300, 1000, "me", "python mine.py")};
  model::Lease bob;
  bob.id = 12;
  bob.uid = 1002;
  bob.user = "bob";
  bob.command = "gpuman select --lease";
  bob.gpu_uuids = {"GPU-30900000-0000-4000-8000-00000000000c"};
  model::Lease mine;
  mine.id = 13;
  mine.uid = 1000;
  mine.user = "me";
  mine.gpu_uuids = {"GPU-30900000-0000-4000-8000-00000000000a"};
  visibility::ResolveOptions options;
  if (leases_error) {
    options.leases_error = leases_error;
  } else {
    options.leases = {bob, mine};
  }
  options.current_uid = 1000;
  return visibility::Resolve({{"CUDA_VISIBLE_DEVICES", "0,2"}, {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
                              {"GPUMAN_LEASE_ID", "13"}},
                             gpus, options);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(ExplainToJsonTest, ContractKeysInOrder) {
  const auto j = ExplainToJson(Busy());
  std::vector<std::string> keys;
  for (const auto& item : j.items()) keys.push_back(item.key());
  EXPECT_THAT(keys, ElementsAre("schema_version", "device_order", "order_is_estimate", "gpu_count",
                                "driver_error", "layers", "entries", "visible", "allowed_uuids",
                                "slurm", "warnings", "notes"));
  EXPECT_EQ(j["slurm"]["value"], "1,2");  // Busy() runs in SLURM_STEP_GPUS=1,2
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["device_order"], "FASTEST_FIRST");
  EXPECT_EQ(j["order_is_estimate"], true);
  EXPECT_EQ(j["gpu_count"], 3);
  EXPECT_TRUE(j["driver_error"].is_null());
}

TEST(ExplainToJsonTest, SlurmMapping) {
  std::vector<model::DeviceSnapshot> gpus(2);
  for (int i = 0; i < 2; ++i) {
    gpus[i].index = i;
    gpus[i].uuid = "GPU-" + std::to_string(i);
    gpus[i].minor_number = 1 - i;  // minors against PCI order
  }
  const auto j = ExplainToJson(visibility::Resolve({{"SLURM_STEP_GPUS", "1"}, {"CUDA_VISIBLE_DEVICES", "0"}}, gpus));
  ASSERT_TRUE(j["slurm"].is_object());
  EXPECT_EQ(j["slurm"]["variable"], "SLURM_STEP_GPUS");
  EXPECT_EQ(j["slurm"]["constrained"], true);  // inferred: 0 beside Slurm index 1
  EXPECT_EQ(j["slurm"]["minor_is_slurm_index"], true);
  ASSERT_EQ(j["slurm"]["mapping"].size(), 1u);
  EXPECT_EQ(j["slurm"]["mapping"][0]["slurm_index"], 1);
  EXPECT_EQ(j["slurm"]["mapping"][0]["minor_number"], 1);
  EXPECT_EQ(j["slurm"]["mapping"][0]["index"], 0);
  EXPECT_EQ(j["slurm"]["mapping"][0]["uuid"], "GPU-0");
  EXPECT_TRUE(j["slurm"]["mapping"][0]["file"].is_null());
}

TEST(ExplainToJsonTest, Layers) {
  const auto j = ExplainToJson(Busy());
  ASSERT_EQ(j["layers"].size(), 3u);
  for (const auto& layer : j["layers"]) {
    std::vector<std::string> keys;
    for (const auto& item : layer.items()) keys.push_back(item.key());
    EXPECT_THAT(keys, ElementsAre("name", "variable", "value", "effect"));
  }
  EXPECT_EQ(j["layers"][0]["name"], "slurm");
  EXPECT_EQ(j["layers"][0]["variable"], "SLURM_STEP_GPUS");
  EXPECT_EQ(j["layers"][0]["value"], "1,2");
  EXPECT_EQ(j["layers"][1]["variable"], "CUDA_DEVICE_ORDER");
  EXPECT_TRUE(j["layers"][1]["value"].is_null());  // unset is null, not ""
  EXPECT_EQ(j["layers"][2]["value"], "0,2,garbage-entry-that-is-long,1");
}

TEST(ExplainToJsonTest, VisibleMapsCudaIndexToPhysical) {
  const auto j = ExplainToJson(Busy());
  ASSERT_EQ(j["visible"].size(), 2u);
  const auto& v0 = j["visible"][0];
  std::vector<std::string> keys;
  for (const auto& item : v0.items()) keys.push_back(item.key());
  EXPECT_THAT(keys, ElementsAre("cuda_index", "index", "uuid", "name", "compute_capability", "capabilities", "mig", "healthy",
                                "outside_allocation", "leased_to_uids", "used_by_uids", "intruder_pids"));
  // FASTEST_FIRST estimate on this machine is 1, 0, 2: "0" is the 4090, "2" the second 3090.
  EXPECT_EQ(v0["cuda_index"], 0);
  EXPECT_EQ(v0["index"], 1);
  EXPECT_EQ(v0["uuid"], "GPU-40900000-0000-4000-8000-00000000000b");
  EXPECT_EQ(v0["name"], "NVIDIA GeForce RTX 4090");
  EXPECT_EQ(v0["healthy"], false);
  EXPECT_TRUE(v0["mig"].is_null());
  EXPECT_EQ(j["visible"][1]["index"], 2);
  EXPECT_EQ(j["visible"][1]["leased_to_uids"], nlohmann::ordered_json::array({1001}));
  EXPECT_EQ(j["visible"][1]["used_by_uids"], nlohmann::ordered_json::array());
  // The one note: this CUDA_VISIBLE_DEVICES, not Slurm's, confines gpuman run/select too.
  ASSERT_EQ(j["notes"].size(), 1u);
  EXPECT_NE(j["notes"][0].get<std::string>().find("clear it with `unset CUDA_VISIBLE_DEVICES`"), std::string::npos)
      << j["notes"][0];
}

TEST(ExplainToJsonTest, OtherUsersLeaseAndProcessAreWarnedOwnAreNot) {
  const auto j = ExplainToJson(Shared());
  ASSERT_EQ(j["warnings"].size(), 3u) << j.dump(2);
  EXPECT_EQ(j["warnings"][0]["code"], "leased_to_other");
  EXPECT_EQ(j["warnings"][0]["message"],
            "GPU 2 (GPU-30900000\u2026) is leased to bob (uid 1002, lease 12 for gpuman select --lease): your "
            "process would share it as cuda:1");
  // Carol's process on bob's leased GPU is not part of his lease.
  EXPECT_EQ(j["warnings"][1]["code"], "intruder");
  EXPECT_EQ(j["warnings"][1]["message"],
            "GPU 2 (GPU-30900000\u2026): pid 4242 python train.py --epochs 90 of carol (uid 1003) is an INTRUDER on "
            "lease 12 (bob): it is not part of that lease");
  EXPECT_EQ(j["visible"][1]["intruder_pids"], nlohmann::ordered_json::array({4242}));
  EXPECT_EQ(j["visible"][0]["intruder_pids"], nlohmann::ordered_json::array());
  EXPECT_EQ(j["warnings"][2]["code"], "used_by_other_user");
  EXPECT_EQ(j["warnings"][2]["message"],
            "GPU 2 (GPU-30900000\u2026) runs 1 process of carol (uid 1003) (pid 4242 python train.py --epochs 90): "
            "your process would share it as cuda:1");
  // cuda:0 is GPU 0: the caller's own lease 13 and own process, nothing to say.
  EXPECT_EQ(j["visible"][0]["index"], 0);
  EXPECT_EQ(j["visible"][0]["leased_to_uids"], nlohmann::ordered_json::array());
  EXPECT_EQ(j["visible"][0]["used_by_uids"], nlohmann::ordered_json::array());
  EXPECT_EQ(j["visible"][1]["leased_to_uids"], nlohmann::ordered_json::array({1002}));
  EXPECT_EQ(j["visible"][1]["used_by_uids"], nlohmann::ordered_json::array({1003}));
}

TEST(ExplainToJsonTest, UnreadableLeasesAreANote) {
  const auto j = ExplainToJson(Shared("open /home/me/.local/state/gpuman/leases.db: permission denied"));
  ASSERT_EQ(j["notes"].size(), 1u);
  EXPECT_EQ(j["notes"][0],
            "leases not checked (open /home/me/.local/state/gpuman/leases.db: permission denied): a GPU leased to "
            "another user is not warned about");
  ASSERT_EQ(j["warnings"].size(), 1u) << "the process warning does not need the lease table";
  EXPECT_EQ(j["warnings"][0]["code"], "used_by_other_user");
}

TEST(ExplainToJsonTest, WarningsHaveStableCodes) {
  const auto j = ExplainToJson(Busy());
  std::vector<std::string> codes;
  for (const auto& w : j["warnings"]) {
    ASSERT_TRUE(w["message"].is_string());
    codes.push_back(w["code"]);
  }
  EXPECT_THAT(codes, ElementsAre("invalid_entry", "index_without_pci_bus_order", "unhealthy_gpu",
                                 "leased_to_other"));
}

TEST(ExplainToJsonTest, Entries) {
  const auto j = ExplainToJson(Busy());
  ASSERT_EQ(j["entries"].size(), 4u);
  EXPECT_EQ(j["entries"][2]["entry"], 3);
  EXPECT_EQ(j["entries"][2]["outcome"], "invalid");
  EXPECT_EQ(j["entries"][3]["outcome"], "ignored");
  EXPECT_TRUE(j["entries"][3]["index"].is_null());
  EXPECT_EQ(j["entries"][0]["index"], 1);
}

TEST(ExplainToJsonTest, WithoutDriver) {
  const auto j = ExplainToJson(visibility::ExplainWithoutDriver({}, "driver not loaded"));
  EXPECT_TRUE(j["gpu_count"].is_null());
  EXPECT_EQ(j["driver_error"], "driver not loaded");
  EXPECT_TRUE(j["visible"].empty());
  EXPECT_EQ(j["warnings"][0]["code"], "no_driver");
  EXPECT_TRUE(j["allowed_uuids"].is_null());
}

TEST(RenderExplainTextTest, NoLineWiderThan80) {
  const std::string text = RenderExplainText(Busy(), TerminalInfo{80, false});
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  for (const std::string& line : Lines(text)) {
    EXPECT_LE(DisplayWidth(line), 80) << line;
  }
}

TEST(RenderExplainTextTest, NarrowTerminalIsTreatedAs80) {
  for (const std::string& line : Lines(RenderExplainText(Busy(), TerminalInfo{40, false}))) {
    EXPECT_LE(DisplayWidth(line), 80) << line;
  }
}

TEST(RenderExplainTextTest, ShowsLayersTableAndWarnings) {
  const std::string text = RenderExplainText(Busy(), TerminalInfo{80, false});
  EXPECT_THAT(text, HasSubstr("SLURM_STEP_GPUS=\"1,2\""));
  EXPECT_THAT(text, HasSubstr("CUDA_DEVICE_ORDER (unset)"));
  EXPECT_THAT(text, HasSubstr("order estimated"));
  EXPECT_THAT(text, HasSubstr("cuda:0    1  GPU-40900000-0000-4000-8000-00000000000b"));
  EXPECT_THAT(text, HasSubstr("! index_without_pci_bus_order:"));
  EXPECT_THAT(text, HasSubstr("! leased_to_other:"));
  EXPECT_THAT(text, HasSubstr("invalid: not a number"));
  // Messages are wrapped, not cut: the end of the lease warning is there.
  EXPECT_THAT(text, HasSubstr("a-very-long-experiment-name.yaml"));
}

TEST(RenderExplainTextTest, OtherUsersOnAVisibleGpu) {
  const std::string text = RenderExplainText(Shared(), TerminalInfo{80, false});
  EXPECT_THAT(text, HasSubstr("! leased_to_other: GPU 2 (GPU-30900000\u2026) is leased to bob"));
  EXPECT_THAT(text, HasSubstr("! used_by_other_user: GPU 2 (GPU-30900000\u2026) runs 1 process of carol"));
  EXPECT_THAT(text, HasSubstr("leased to uid 1002; used by uid 1003"));
  EXPECT_THAT(text, Not(HasSubstr("uid 1000")));
  EXPECT_THAT(text, Not(HasSubstr("Notes:")));
  for (const std::string& line : Lines(text)) EXPECT_LE(DisplayWidth(line), 80) << line;
}

TEST(RenderExplainTextTest, NotesComeLastAndWrap) {
  const std::string text =
      RenderExplainText(Shared("open /home/me/.local/state/gpuman/leases.db: permission denied"), TerminalInfo{80, false});
  const size_t notes = text.find("\nNotes:\n  - leases not checked (open /home/me/");
  ASSERT_NE(notes, std::string::npos) << text;
  EXPECT_GT(notes, text.find("Warnings:"));
  EXPECT_THAT(text, HasSubstr("\n    denied): a GPU leased to another user is not warned about\n")) << text;
  for (const std::string& line : Lines(text)) EXPECT_LE(DisplayWidth(line), 80) << line;
}

TEST(RenderExplainTextTest, WideTerminalAllowsLongerLines) {
  const std::string text = RenderExplainText(Busy(), TerminalInfo{160, false});
  for (const std::string& line : Lines(text)) EXPECT_LE(DisplayWidth(line), 160) << line;
}

TEST(RenderExplainTextTest, ColourOnlyWhenAsked) {
  EXPECT_THAT(RenderExplainText(Busy(), TerminalInfo{80, false}), Not(HasSubstr("\x1b[")));
  EXPECT_THAT(RenderExplainText(Busy(), TerminalInfo{80, true}), HasSubstr("\x1b["));
}

TEST(RenderExplainTextTest, ColouredLinesFitWhenEscapesAreRemoved) {
  const std::string text = RenderExplainText(Busy(), TerminalInfo{80, true});
  for (std::string line : Lines(text)) {
    std::string plain;
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '\x1b') {
        while (i < line.size() && line[i] != 'm') ++i;
        continue;
      }
      plain += line[i];
    }
    EXPECT_LE(DisplayWidth(plain), 80) << plain;
  }
}

TEST(RenderExplainTextTest, NothingVisibleAndNoDriver) {
  const std::string empty =
      RenderExplainText(visibility::Resolve({{"CUDA_VISIBLE_DEVICES", ""}}, Mixed()), TerminalInfo{});
  EXPECT_THAT(empty, HasSubstr("(no device)"));
  EXPECT_THAT(empty, HasSubstr("nothing_visible"));
  const std::string no_driver =
      RenderExplainText(visibility::ExplainWithoutDriver({}, "nvml missing"), TerminalInfo{});
  EXPECT_THAT(no_driver, Not(HasSubstr("Visible to CUDA")));
  EXPECT_THAT(no_driver, HasSubstr("no_driver"));
}

}  // namespace
}  // namespace gpuman::render
