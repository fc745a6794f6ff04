#include "policy/selection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "support/snapshot_builder.h"

namespace gpuman::policy {
namespace {

using model::DeviceSnapshot;
using model::Lease;
using model::MachineSnapshot;
using model::PcieLevel;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int64_t kGiB = int64_t{1} << 30;

using ::gpuman::testing::MakeTopology;
using ::gpuman::testing::SnapshotBuilder;

std::string Uuid(int index) { return ::gpuman::testing::ShortUuid(index); }

// Each GPU's NUMA node from its index.
std::function<void(DeviceSnapshot&)> NumaBy(int (*node)(int index)) {
  return [node](DeviceSnapshot& g) { g.numa_node = node(g.index); };
}

// 4 x A100: NVLink pairs 0-1 and 2-3 (NV12), pairs behind PCIe switches (PXB), NUMA 0/1.
MachineSnapshot FourA100() {
  return SnapshotBuilder()
      .Model("NVIDIA A100-SXM4-80GB", "8.0")
      .MemoryGiB(80)
      .Add(4)
      .ForEach(NumaBy([](int i) { return i / 2; }))
      .Topology([](int a, int b) { return a / 2 == b / 2 ? 12 : 0; },
                [](int a, int b) { return a / 2 == b / 2 ? PcieLevel::kMultipleSwitch : PcieLevel::kSystem; })
      .Build();
}

// 8 x H100 on NVSwitch: every pair NV18; GPUs 0-3 on NUMA 0, 4-7 on NUMA 1.
MachineSnapshot EightH100() {
  return SnapshotBuilder()
      .Model("NVIDIA H100 80GB HBM3", "9.0")
      .MemoryGiB(80)
      .Add(8)
      .ForEach(NumaBy([](int i) { return i / 4; }))
      .Topology([](int, int) { return 18; },
                [](int a, int b) { return a / 4 == b / 4 ? PcieLevel::kNumaNode : PcieLevel::kSystem; })
      .Build();
}

// A workstation of mixed cards without NVLink: 0-1 and 2-3 share a PCIe switch, all
// four share one host bridge.
MachineSnapshot Workstation() {
  return SnapshotBuilder()
      .Numa(0)
      .Model("NVIDIA GeForce RTX 4090", "8.9").MemoryGiB(24).Add()
      .Model("NVIDIA RTX A6000", "8.6").MemoryGiB(48).Add()
      .Model("NVIDIA GeForce RTX 3090", "8.6").MemoryGiB(24).Add()
      .Model("Tesla T4", "7.5").MemoryGiB(16).Add()
      .Topology([](int, int) { return 0; },
                [](int a, int b) { return a / 2 == b / 2 ? PcieLevel::kSingleSwitch : PcieLevel::kHostBridge; })
      .Build();
}

// No topology matrix: only NUMA nodes (0, 1, 0, 1).
MachineSnapshot NoTopology() {
  return SnapshotBuilder()
      .Model("NVIDIA L4", "8.9")
      .MemoryGiB(24)
      .Add(4)
      .ForEach(NumaBy([](int i) { return i % 2; }))
      .Build();
}

// 512 GPUs: 64 NVSwitch groups of 8 (NV18); inside a group pairs share a switch (PIX),
// the rest of the group is PXB; groups 0-31 are NUMA 0, 32-63 NUMA 1.
MachineSnapshot Synthetic512() {
  return SnapshotBuilder()
      .Model("NVIDIA H100", "9.0")
      .MemoryGiB(80)
      .Add(512)
      .ForEach(NumaBy([](int i) { return i / 256; }))
      .Topology([](int a, int b) { return a / 8 == b / 8 ? 18 : 0; },
                [](int a, int b) {
                  if (a / 2 == b / 2) return PcieLevel::kSingleSwitch;
                  if (a / 8 == b / 8) return PcieLevel::kMultipleSwitch;
                  if (a / 256 == b / 256) return PcieLevel::kNumaNode;
                  return PcieLevel::kSystem;
                })
      .Build();
}

Lease MakeLease(int64_t id, const std::string& user, std::vector<int> gpus,
                std::vector<int32_t> pids = {}) {
  Lease lease;
  lease.id = id;
  lease.user = user;
  lease.uid = 1000 + static_cast<uint32_t>(id);
  for (int g : gpus) lease.gpu_uuids.push_back(Uuid(g));
  for (int32_t pid : pids) lease.processes.push_back({pid, 1});
  return lease;
}

void AddProcess(MachineSnapshot& snap, int gpu, uint32_t pid, const char* user = nullptr) {
  model::GpuProcess process;
  process.pid = pid;
  if (user) process.user = user;
  snap.gpus[gpu].processes.push_back(process);
}

model::GpuRequest Count(int n) {
  model::GpuRequest req;
  req.count = n;
  return req;
}

// Selected indices, or a failure that prints the error.
std::vector<int> Pick(const MachineSnapshot& snap, const std::vector<Lease>& leases,
                      const model::GpuRequest& req) {
  Result<Selection> r = Select(snap, leases, req);
  if (!r) {
    ADD_FAILURE() << "select failed: " << r.error().message;
    return {};
  }
  return r->indices;
}

// ---------------------------------------------------------------------------
// Filters: one row per filter, with the reason a verdict gives.

struct FilterCase {
  const char* name;
  std::function<void(MachineSnapshot&, std::vector<Lease>&, model::GpuRequest&)> setup;
  int gpu;  // the GPU whose verdict is checked (on the workstation)
  std::vector<std::string> reasons;  // empty = eligible
};

TEST(SelectionFilterTest, EachFilterGivesItsReason) {
  const FilterCase kCases[] = {
      {"no filter", [](auto&, auto&, auto&) {}, 0, {}},
      {"model matches case-insensitively",
       [](auto&, auto&, auto& req) { req.model = "rtx 40"; }, 0, {}},
      {"model mismatch", [](auto&, auto&, auto& req) { req.model = "a6000"; }, 0,
       {"\"NVIDIA GeForce RTX 4090\" does not match model \"a6000\""}},
      {"model with unknown name",
       [](auto& snap, auto&, auto& req) {
         snap.gpus[0].name.reset();
         req.model = "4090";
       },
       0, {"name unknown, cannot match model \"4090\""}},
      {"compute capability enough",
       [](auto&, auto&, auto& req) { req.min_compute_capability = "8.6"; }, 1, {}},
      {"compute capability too low",
       [](auto&, auto&, auto& req) { req.min_compute_capability = "8.0"; }, 3,
       {"compute capability 7.5 < 8.0"}},
      {"compute capability compared numerically, 7.5 < 7.10",
       [](auto&, auto&, auto& req) { req.min_compute_capability = "7.10"; }, 3,
       {"compute capability 7.5 < 7.10"}},
      {"compute capability unknown",
       [](auto& snap, auto&, auto& req) {
         snap.gpus[0].compute_capability.reset();
         req.min_compute_capability = "8";
       },
       0, {"compute capability unknown"}},
      {"free memory too low",
       [](auto& snap, auto&, auto& req) {
         snap.gpus[1].memory_free_bytes = 10 * kGiB;
         req.min_free_memory_bytes = 20 * kGiB;
       },
       1, {"free memory 10 GiB < 20 GiB"}},
      {"free memory unknown",
       [](auto& snap, auto&, auto& req) {
         snap.gpus[1].memory_free_bytes.reset();
         req.min_free_memory_bytes = 20 * kGiB;
       },
       1, {"free memory unknown"}},
      {"total memory too small",
       [](auto&, auto&, auto& req) { req.min_free_memory_bytes = 20 * kGiB; }, 3,
       {"total memory 16 GiB < 20 GiB"}},
      {"utilization too high",
       [](auto& snap, auto&, auto& req) {
         snap.gpus[2].gpu_utilization_percent = 97;
         req.max_utilization_percent = 50;
       },
       2, {"utilization 97% > 50%"}},
      {"utilization at the bound",
       [](auto& snap, auto&, auto& req) {
         snap.gpus[2].gpu_utilization_percent = 50;
         req.max_utilization_percent = 50;
       },
       2, {}},
      {"utilization unknown",
       [](auto& snap, auto&, auto& req) {
         snap.gpus[2].gpu_utilization_percent.reset();
         req.max_utilization_percent = 50;
       },
       2, {"utilization unknown"}},
      {"excluded", [](auto&, auto&, auto& req) { req.exclude = {Uuid(2)}; }, 2, {"excluded"}},
      {"not in --gpus",
       [](auto&, auto&, auto& req) { req.gpus = std::vector<std::string>{Uuid(1)}; }, 2,
       {"not among the requested GPUs"}},
      {"in --gpus",
       [](auto&, auto&, auto& req) { req.gpus = std::vector<std::string>{Uuid(1)}; }, 1, {}},
      {"outside the enclosing allocation",
       [](auto&, auto&, auto& req) {
         req.allowed = std::vector<std::string>{Uuid(0), "GPU-elsewhere"};
       },
       1, {"outside the enclosing allocation"}},
      {"unhealthy",
       [](auto& snap, auto&, auto&) {
         snap.gpus[1].is_healthy = false;
         snap.gpus[1].health_problems = {"gpu is lost"};
       },
       1, {"unhealthy: gpu is lost"}},
      {"uuid unknown", [](auto& snap, auto&, auto&) { snap.gpus[1].uuid.reset(); }, 1,
       {"uuid unknown"}},
      {"leased", [](auto&, auto& leases, auto&) { leases.push_back(MakeLease(12, "bob", {1})); },
       1, {"leased to bob (lease 12)"}},
      {"leased by a user without a name",
       [](auto&, auto& leases, auto&) { leases.push_back(MakeLease(7, "", {1})); }, 1,
       {"leased to uid 1007 (lease 7)"}},
      {"foreign processes",
       [](auto& snap, auto&, auto&) {
         AddProcess(snap, 0, 4242, "alice");
         AddProcess(snap, 0, 4243);
       },
       0, {"2 foreign processes: pid 4242 (alice), pid 4243"}},
      {"foreign processes allowed with allow_shared",
       [](auto& snap, auto&, auto& req) {
         AddProcess(snap, 0, 4242, "alice");
         req.allow_shared = true;
       },
       0, {}},
      {"allow_shared does not override a lease",
       [](auto& snap, auto& leases, auto& req) {
         AddProcess(snap, 0, 4242, "alice");
         leases.push_back(MakeLease(3, "alice", {0}));
         req.allow_shared = true;
       },
       0, {"leased to alice (lease 3)"}},
      {"several reasons, permanent ones first",
       [](auto& snap, auto& leases, auto& req) {
         snap.gpus[3].gpu_utilization_percent = 80;
         leases.push_back(MakeLease(5, "carol", {3}));
         req.max_utilization_percent = 10;
         req.model = "rtx";
       },
       3,
       {"\"Tesla T4\" does not match model \"rtx\"", "leased to carol (lease 5)",
        "utilization 80% > 10%"}},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.name);
    MachineSnapshot snap = Workstation();
    std::vector<Lease> leases;
    model::GpuRequest req;
    c.setup(snap, leases, req);
    Result<std::vector<GpuVerdict>> verdicts = EvaluateGpus(snap, leases, req);
    ASSERT_TRUE(verdicts.has_value()) << verdicts.error().message;
    ASSERT_EQ(verdicts->size(), 4u);
    const GpuVerdict& v = (*verdicts)[c.gpu];
    EXPECT_EQ(v.index, c.gpu);
    EXPECT_EQ(v.reasons, c.reasons);
    EXPECT_EQ(v.eligible, c.reasons.empty());
  }
}

TEST(SelectionFilterTest, VerdictsListEveryGpuAlsoOnSuccess) {
  MachineSnapshot snap = FourA100();
  snap.gpus[3].uuid.reset();
  std::vector<Lease> leases = {MakeLease(3, "alice", {0})};
  Result<Selection> r = Select(snap, leases, Count(1));
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_EQ(r->verdicts.size(), 4u);
  EXPECT_EQ(r->verdicts[0].uuid, Uuid(0));
  EXPECT_THAT(r->verdicts[0].reasons, ElementsAre("leased to alice (lease 3)"));
  EXPECT_TRUE(r->verdicts[1].eligible);
  EXPECT_TRUE(r->verdicts[2].eligible);
  EXPECT_EQ(r->verdicts[3].uuid, "");
  EXPECT_FALSE(r->verdicts[3].eligible);
}

// ---------------------------------------------------------------------------
// Occupancy, Given/When/Then.

TEST(SelectionOccupancyTest, LeaseProcessesAreNotForeignOnTheLeasedGpu) {
  // Given GPU 0 leased to alice for pid 100, which runs on GPU 0 and (escaped) on GPU 1.
  MachineSnapshot snap = FourA100();
  AddProcess(snap, 0, 100, "alice");
  AddProcess(snap, 1, 100, "alice");
  std::vector<Lease> leases = {MakeLease(3, "alice", {0}, {100})};

  // When we ask for verdicts.
  Result<std::vector<GpuVerdict>> v = EvaluateGpus(snap, leases, Count(1));
  ASSERT_TRUE(v.has_value());

  // Then GPU 0 is only leased, and the same pid is foreign on GPU 1, which no lease covers.
  EXPECT_THAT((*v)[0].reasons, ElementsAre("leased to alice (lease 3)"));
  EXPECT_THAT((*v)[1].reasons, ElementsAre("1 foreign process: pid 100 (alice)"));
}

TEST(SelectionOccupancyTest, ProcessOfAnotherLeaseIsForeign) {
  // Given two leases of GPU 0 (one for pid 100) and an unknown pid 200 on it.
  MachineSnapshot snap = FourA100();
  AddProcess(snap, 0, 100);
  AddProcess(snap, 0, 200);
  std::vector<Lease> leases = {MakeLease(3, "alice", {0}, {100}), MakeLease(4, "bob", {2}, {200})};
  // When / Then: pid 200 belongs to a lease of GPU 2, not GPU 0, so it is foreign here.
  Result<std::vector<GpuVerdict>> v = EvaluateGpus(snap, leases, Count(1));
  ASSERT_TRUE(v.has_value());
  EXPECT_THAT((*v)[0].reasons,
              ElementsAre("leased to alice (lease 3)", "1 foreign process: pid 200"));
}

TEST(SelectionOccupancyTest, ForeignProcessesBlockUnlessShared) {
  // Given foreign processes on GPUs 0, 1 and 2 of the A100 box.
  MachineSnapshot snap = FourA100();
  AddProcess(snap, 0, 10);
  AddProcess(snap, 1, 11);
  AddProcess(snap, 2, 12);
  // When asking for two GPUs, then only GPU 3 is eligible: busy.
  Result<Selection> busy = Select(snap, {}, Count(2));
  ASSERT_FALSE(busy.has_value());
  EXPECT_EQ(busy.error().code, ErrorCode::kBusy);
  // When sharing is allowed, then the NVLink pair 2-3 is chosen (one shared GPU beats two).
  model::GpuRequest shared = Count(2);
  shared.allow_shared = true;
  EXPECT_THAT(Pick(snap, {}, shared), ElementsAre(2, 3));
  // And a single shared request prefers the idle GPU.
  shared.count = 1;
  EXPECT_THAT(Pick(snap, {}, shared), ElementsAre(3));
}

TEST(SelectionOccupancyTest, UnhealthyGpuIsNeverChosen) {
  MachineSnapshot snap = FourA100();
  snap.gpus[2].is_healthy = false;
  model::GpuRequest req = Count(1);
  req.gpus = std::vector<std::string>{Uuid(2), Uuid(3)};
  EXPECT_THAT(Pick(snap, {}, req), ElementsAre(3));
  req.allow_shared = true;
  EXPECT_THAT(Pick(snap, {}, req), ElementsAre(3));
  req.count = 2;
  Result<Selection> r = Select(snap, {}, req);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kBusy);  // a reset may bring it back
  EXPECT_EQ(r.error().message, "need 2 GPUs, 1 eligible: GPU 2 unhealthy");
}

TEST(SelectionOccupancyTest, DrainedGpuIsNeverChosenAndSaysWhy) {
  // Given GPU 1 drained by the health watch and GPU 2 by an admin without a reason.
  MachineSnapshot snap = FourA100();
  model::GpuRequest req = Count(2);
  req.drained = {{Uuid(1), "health: Xid 79"}, {Uuid(2), ""}};
  // Then two GPUs are still picked, neither of them drained.
  EXPECT_THAT(Pick(snap, {}, req), ElementsAre(0, 3));
  // And every verdict of a drained GPU says so, with the reason.
  Result<std::vector<GpuVerdict>> verdicts = EvaluateGpus(snap, {}, req);
  ASSERT_TRUE(verdicts.has_value());
  EXPECT_TRUE((*verdicts)[0].eligible);
  EXPECT_FALSE((*verdicts)[1].eligible);
  EXPECT_THAT((*verdicts)[1].reasons, ElementsAre("drained (health: Xid 79)"));
  EXPECT_THAT((*verdicts)[2].reasons, ElementsAre("drained (no reason given)"));
  // Asking for all four is busy (drains are lifted), and the message names the drains.
  req.count = 4;
  Result<Selection> r = Select(snap, {}, req);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kBusy);
  EXPECT_EQ(r.error().message,
            "need 4 GPUs, 2 eligible: GPU 1 drained (health: Xid 79); GPU 2 drained (no reason given)");
  // A drain of a GPU that is not on this machine is ignored.
  req.count = 1;
  req.drained = {{"GPU-elsewhere", "moved"}};
  EXPECT_THAT(Pick(snap, {}, req), ElementsAre(0));
}

// ---------------------------------------------------------------------------
// Placement.

struct PlacementCase {
  const char* name;
  std::function<MachineSnapshot()> machine;
  std::vector<int> leased;  // GPUs held by one lease
  int count;
  std::vector<int> expected;
  const char* placement;
};

TEST(SelectionPlacementTest, Table) {
  const PlacementCase kCases[] = {
      {"A100: -n 2 takes an NVLink pair", FourA100, {}, 2, {0, 1}, "NVLink (NV12)"},
      {"A100: -n 1 on an idle box takes GPU 0", FourA100, {}, 1, {0}, "single GPU"},
      {"A100: GPU 0 leased, -n 1 takes GPU 1 and keeps 2-3 whole", FourA100, {0}, 1, {1},
       "single GPU"},
      {"A100: GPU 0 leased, -n 2 takes the whole pair 2-3", FourA100, {0}, 2, {2, 3},
       "NVLink (NV12)"},
      {"A100: GPU 1 leased, -n 3 must cross NUMA nodes", FourA100, {1}, 3, {0, 2, 3},
       "across NUMA nodes (SYS)"},
      {"A100: -n 4 takes everything", FourA100, {}, 4, {0, 1, 2, 3}, "across NUMA nodes (SYS)"},
      {"H100: -n 2 ties go to the lowest indices", EightH100, {}, 2, {0, 1}, "NVLink (NV18)"},
      {"H100: GPU 0 leased, -n 4 stays on one NUMA node", EightH100, {0}, 4, {4, 5, 6, 7},
       "NVLink (NV18)"},
      {"H100: GPU 0 leased, -n 3 fills the partly used NUMA node", EightH100, {0}, 3,
       {1, 2, 3}, "NVLink (NV18)"},
      {"H100: GPU 5 leased, -n 2 packs into NUMA node 1", EightH100, {5}, 2, {4, 6},
       "NVLink (NV18)"},
      {"H100: GPU 5 leased, -n 1 packs into NUMA node 1", EightH100, {5}, 1, {4},
       "single GPU"},
      {"H100: -n 8", EightH100, {}, 8, {0, 1, 2, 3, 4, 5, 6, 7}, "NVLink (NV18)"},
      {"workstation: -n 2 takes a PCIe switch pair", Workstation, {}, 2, {0, 1},
       "same PCIe switch (PIX)"},
      {"workstation: GPU 1 leased, -n 2 takes the other switch", Workstation, {1}, 2, {2, 3},
       "same PCIe switch (PIX)"},
      {"workstation: GPUs 1 and 2 leased, -n 2 crosses switches", Workstation, {1, 2}, 2,
       {0, 3}, "same PCIe host bridge (PHB)"},
      {"workstation: GPU 0 leased, -n 1 takes its switch partner", Workstation, {0}, 1, {1},
       "single GPU"},
      {"no topology: -n 2 takes one NUMA node", NoTopology, {}, 2, {0, 2}, "same NUMA node"},
      {"no topology: GPU 0 leased, -n 1 takes its NUMA neighbour", NoTopology, {0}, 1, {2},
       "single GPU"},
      {"no topology: -n 3 spans nodes, lowest indices", NoTopology, {}, 3, {0, 1, 2},
       "across NUMA nodes"},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.name);
    MachineSnapshot snap = c.machine();
    std::vector<Lease> leases;
    if (!c.leased.empty()) leases.push_back(MakeLease(1, "alice", c.leased));
    Result<Selection> r = Select(snap, leases, Count(c.count));
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(r->indices, c.expected);
    EXPECT_EQ(r->placement, c.placement);
    ASSERT_EQ(r->uuids.size(), c.expected.size());
    for (size_t i = 0; i < c.expected.size(); ++i) EXPECT_EQ(r->uuids[i], Uuid(c.expected[i]));
  }
}

TEST(SelectionPlacementTest, SingleGpuPrefersLowUtilizationThenFreeMemory) {
  // Given an idle NVSwitch box where GPUs differ only in load.
  MachineSnapshot snap = EightH100();
  for (auto& gpu : snap.gpus) gpu.gpu_utilization_percent = 30;
  snap.gpus[5].gpu_utilization_percent = 5;
  snap.gpus[6].gpu_utilization_percent = 5;
  snap.gpus[6].memory_free_bytes = 81 * kGiB;
  // When / Then: lowest utilization wins, then the most free memory.
  EXPECT_THAT(Pick(snap, {}, Count(1)), ElementsAre(6));
}

TEST(SelectionPlacementTest, HigherLinkCountWins) {
  // Given GPU 0 linked to 1 by NV4 and to 2 by NV12, all on one switch.
  MachineSnapshot snap = FourA100();
  snap.topology = MakeTopology(
      4,
      [](int a, int b) {
        if (a == 0 && b == 1) return 4;
        if (a == 0 && b == 2) return 12;
        return 0;
      },
      [](int, int) { return PcieLevel::kSingleSwitch; });
  Result<Selection> r = Select(snap, {}, Count(2));
  ASSERT_TRUE(r.has_value());
  EXPECT_THAT(r->indices, ElementsAre(0, 2));
  EXPECT_EQ(r->placement, "NVLink (NV12)");
}

TEST(SelectionPlacementTest, RaggedOrOneSidedTopologyIsReadSafely) {
  // Given a matrix with NVLink only filled in one direction and a missing row tail.
  MachineSnapshot snap = FourA100();
  snap.topology->nvlinks = {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 8}};  // 2->3 only, no row 3
  snap.topology->pcie[1].resize(2);                                    // 1->2, 1->3 unknown
  // When / Then: 2-3 is an NVLink pair; GPU 1's unknown paths make it the worst partner.
  Result<Selection> r = Select(snap, {}, Count(2));
  ASSERT_TRUE(r.has_value());
  EXPECT_THAT(r->indices, ElementsAre(2, 3));
  EXPECT_EQ(r->placement, "NVLink (NV8)");
}

TEST(SelectionPlacementTest, DeterministicAcrossCalls) {
  MachineSnapshot snap = EightH100();
  std::vector<Lease> leases = {MakeLease(1, "alice", {2})};
  std::vector<int> first = Pick(snap, leases, Count(3));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Pick(snap, leases, Count(3)), first);
  EXPECT_THAT(first, ElementsAre(0, 1, 3));
}

TEST(SelectionPlacementTest, AllowedSetRestricts) {
  MachineSnapshot snap = FourA100();
  model::GpuRequest req = Count(2);
  req.allowed = std::vector<std::string>{Uuid(1), Uuid(2), Uuid(3)};
  EXPECT_THAT(Pick(snap, {}, req), ElementsAre(2, 3));
  req.count = 1;  // GPU 0 is outside, so pair 0-1 is already broken for us
  EXPECT_THAT(Pick(snap, {}, req), ElementsAre(1));
  req.allowed = std::vector<std::string>{Uuid(0), Uuid(2)};
  req.count = 2;
  Result<Selection> r = Select(snap, {}, req);
  ASSERT_TRUE(r.has_value());
  EXPECT_THAT(r->indices, ElementsAre(0, 2));
  EXPECT_EQ(r->placement, "across NUMA nodes (SYS)");
  req.count = 3;
  r = Select(snap, {}, req);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
}

TEST(SelectionPlacementTest, GpusNoneWithCountZeroSelectsNothing) {
  model::GpuRequest req = Count(0);
  req.gpus = std::vector<std::string>{};
  Result<Selection> r = Select(FourA100(), {}, req);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_THAT(r->uuids, IsEmpty());
  EXPECT_THAT(r->indices, IsEmpty());
  EXPECT_EQ(r->placement, "none");
  ASSERT_EQ(r->verdicts.size(), 4u);
  EXPECT_THAT(r->verdicts[0].reasons, ElementsAre("not among the requested GPUs"));
}

// ---------------------------------------------------------------------------
// Errors: invalid, busy (wait may help), not found (it never will).

TEST(SelectionErrorTest, InvalidRequests) {
  struct Case {
    const char* name;
    std::function<void(model::GpuRequest&)> setup;
    const char* message;
  };
  const Case kCases[] = {
      {"count 0", [](auto& r) { r.count = 0; }, "count must be at least 1 (0 only with --gpus none)"},
      {"negative count", [](auto& r) { r.count = -1; }, "count must be at least 1, got -1"},
      {"--gpus none with count 1", [](auto& r) { r.gpus = std::vector<std::string>{}; },
       "--gpus none selects no GPU, but count is 1"},
      {"unknown uuid in gpus",
       [](auto& r) { r.gpus = std::vector<std::string>{Uuid(0), "GPU-nope"}; },
       "unknown GPU GPU-nope in --gpus"},
      {"unknown uuid in exclude", [](auto& r) { r.exclude = {"GPU-nope"}; },
       "unknown GPU GPU-nope in --exclude"},
      {"bad compute capability", [](auto& r) { r.min_compute_capability = "eight"; },
       "invalid compute capability \"eight\": expected major.minor, e.g. 8.0"},
      {"utilization above 100", [](auto& r) { r.max_utilization_percent = 101; },
       "maximum utilization must be 0..100%, got 101"},
      {"negative memory", [](auto& r) { r.min_free_memory_bytes = -1; },
       "minimum free memory must not be negative"},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.name);
    model::GpuRequest req;
    c.setup(req);
    Result<Selection> r = Select(FourA100(), {}, req);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(r.error().message, c.message);
  }
}

TEST(SelectionErrorTest, BusySummarizesWhy) {
  // Given GPU 0 leased to alice and foreign processes on GPUs 2 and 3.
  MachineSnapshot snap = FourA100();
  AddProcess(snap, 2, 20);
  AddProcess(snap, 3, 30);
  std::vector<Lease> leases = {MakeLease(3, "alice", {0})};
  // When asking for two GPUs.
  Result<Selection> r = Select(snap, leases, Count(2));
  // Then it is busy, and the message says which GPUs are held and why.
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kBusy);
  EXPECT_EQ(r.error().message,
            "need 2 GPUs, 1 eligible: GPU 0 leased to alice (lease 3); "
            "GPU 2,3 busy: foreign processes");
}

TEST(SelectionErrorTest, BusyLeavesOutGpusThatCanNeverQualify) {
  MachineSnapshot snap = Workstation();
  snap.gpus[1].memory_free_bytes = 30 * kGiB;
  model::GpuRequest req = Count(2);
  req.min_free_memory_bytes = 40 * kGiB;  // only the A6000 (48 GiB) could ever do
  req.min_compute_capability = "8.0";
  Result<Selection> r = Select(snap, {}, req);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(r.error().message,
            "need 2 GPUs, only 1 of 4 can ever be eligible: GPU 0,2 total memory below 40 GiB; "
            "GPU 3 compute capability below 8.0");
  req.count = 1;
  r = Select(snap, {}, req);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kBusy);
  EXPECT_EQ(r.error().message, "need 1 GPU, 0 eligible: GPU 1 free memory below 40 GiB");
}

TEST(SelectionErrorTest, NotFoundWhenTheMachineCanNeverMeetIt) {
  struct Case {
    const char* name;
    std::function<void(model::GpuRequest&)> setup;
    const char* message;
  };
  const Case kCases[] = {
      {"more GPUs than the machine has", [](auto& r) { r.count = 5; },
       "need 5 GPUs, only 4 of 4 can ever be eligible"},
      {"wrong model", [](auto& r) { r.model = "h100"; },
       "need 1 GPU, only 0 of 4 can ever be eligible: GPU 0-3 not model \"h100\""},
      {"too new compute capability", [](auto& r) { r.min_compute_capability = "9.0"; },
       "need 1 GPU, only 0 of 4 can ever be eligible: GPU 0-3 compute capability below 9.0"},
      {"excluded and not requested",
       [](auto& r) {
         r.count = 2;
         r.gpus = std::vector<std::string>{Uuid(0), Uuid(1)};
         r.exclude = {Uuid(1)};
       },
       "need 2 GPUs, only 1 of 4 can ever be eligible: GPU 1 excluded; "
       "GPU 2,3 not among the requested GPUs"},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.name);
    model::GpuRequest req;
    c.setup(req);
    // Leases do not turn "never" into "busy".
    Result<Selection> r = Select(FourA100(), {MakeLease(1, "bob", {0, 1, 2, 3})}, req);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
    EXPECT_EQ(r.error().message, c.message);
  }
}

TEST(SelectionErrorTest, EmptyMachine) {
  Result<Selection> r = Select(MachineSnapshot{}, {}, Count(1));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(r.error().message, "need 1 GPU, only 0 of 0 can ever be eligible");
}

// ---------------------------------------------------------------------------
// Large machines take the greedy path; check that its answers are still sound.

TEST(SelectionLargeTest, Synthetic512) {
  // Given 512 GPUs with GPU 0 leased.
  MachineSnapshot snap = Synthetic512();
  std::vector<Lease> leases = {MakeLease(1, "alice", {0})};

  // Then one GPU comes from the partly used group, next to the leased one.
  EXPECT_THAT(Pick(snap, leases, Count(1)), ElementsAre(1));
  // Two GPUs: a PCIe-switch pair inside the partly used NVLink group.
  Result<Selection> two = Select(snap, leases, Count(2));
  ASSERT_TRUE(two.has_value());
  EXPECT_THAT(two->indices, ElementsAre(2, 3));
  EXPECT_EQ(two->placement, "NVLink (NV18)");
  EXPECT_EQ(two->verdicts.size(), 512u);
  // Four: the rest of group 0 first.
  EXPECT_THAT(Pick(snap, leases, Count(4)), ElementsAre(1, 2, 3, 4));
  // Eight: a whole free group.
  std::vector<int> eight;
  for (int i = 8; i < 16; ++i) eight.push_back(i);
  EXPECT_EQ(Pick(snap, leases, Count(8)), eight);
  // 64: group 0's seven, seven whole groups, and one more GPU, all on NUMA node 0.
  Result<Selection> many = Select(snap, leases, Count(64));
  ASSERT_TRUE(many.has_value());
  std::vector<int> expected;
  for (int i = 1; i <= 64; ++i) expected.push_back(i);
  EXPECT_EQ(many->indices, expected);
  EXPECT_EQ(many->placement, "same NUMA node (NODE)");
  // Everything that is left.
  Result<Selection> all = Select(snap, leases, Count(511));
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(all->indices.size(), 511u);
  EXPECT_EQ(all->indices.front(), 1);
  EXPECT_EQ(all->placement, "across NUMA nodes (SYS)");
  // And one more is busy.
  Result<Selection> too_many = Select(snap, leases, Count(512));
  ASSERT_FALSE(too_many.has_value());
  EXPECT_EQ(too_many.error().code, ErrorCode::kBusy);
  EXPECT_EQ(too_many.error().message,
            "need 512 GPUs, 511 eligible: GPU 0 leased to alice (lease 1)");
}

TEST(SelectionLargeTest, Synthetic512WithoutTopology) {
  MachineSnapshot snap = Synthetic512();
  snap.topology.reset();
  std::vector<Lease> leases = {MakeLease(1, "alice", {300})};
  Result<Selection> r = Select(snap, leases, Count(3));
  ASSERT_TRUE(r.has_value());
  // NUMA node 1 is partly used, so the three come from there.
  EXPECT_THAT(r->indices, ElementsAre(256, 257, 258));
  EXPECT_EQ(r->placement, "same NUMA node");
}

}  // namespace
}  // namespace gpuman::policy

namespace gpuman::policy {
namespace {

TEST(GpuRequestTest, WithAllowedAsExclusionsFoldsTheAllocationIntoExclusions) {
  model::GpuRequest req;
  req.count = 2;
  req.gpus = std::vector<std::string>{"GPU-a", "GPU-b", "GPU-c"};
  req.min_free_memory_bytes = 1 << 30;
  req.max_utilization_percent = 10;
  req.model = "A100";
  req.min_compute_capability = "8.0";
  req.exclude = {"GPU-d"};
  req.allow_shared = true;
  req.allowed = std::vector<std::string>{"GPU-a", "GPU-b"};
  req.drained = {{"GPU-b", "maintenance"}};
  model::GpuRequest wire = model::WithAllowedAsExclusions(req, {"GPU-a", "GPU-b", "GPU-c", "GPU-d"});
  EXPECT_EQ(wire.exclude, (std::vector<std::string>{"GPU-d", "GPU-c"}));
  EXPECT_EQ(wire.count, 2);
  EXPECT_EQ(wire.gpus, req.gpus);
  EXPECT_EQ(wire.min_free_memory_bytes, req.min_free_memory_bytes);
  EXPECT_EQ(wire.max_utilization_percent, 10);
  EXPECT_EQ(wire.model, "A100");
  EXPECT_EQ(wire.min_compute_capability, "8.0");
  EXPECT_TRUE(wire.allow_shared);
  EXPECT_FALSE(wire.allowed.has_value());
  EXPECT_TRUE(wire.drained.empty());
}

// ---------------------------------------------------------------------------
// Memory slices (docs/share.md).

model::GpuRequest Slice(int64_t gib, int n = 1) {
  model::GpuRequest req = Count(n);
  req.gpu_memory_bytes = gib * kGiB;
  return req;
}

Lease SliceLease(int64_t id, const std::string& user, int gpu, int64_t gib, std::vector<int32_t> pids = {}) {
  Lease lease = MakeLease(id, user, {gpu}, std::move(pids));
  lease.gpu_memory_bytes = gib * kGiB;
  return lease;
}

TEST(SelectionSliceTest, SlicesShareAGpuUntilItsMemoryIsDeclared) {
  MachineSnapshot snap = FourA100();  // 80 GiB each
  std::vector<Lease> leases = {SliceLease(1, "alice", 0, 30), SliceLease(2, "bob", 0, 30)};
  // 20 GiB left on GPU 0: a 20 GiB slice fits there (best fit), a 30 GiB one goes elsewhere.
  EXPECT_THAT(Pick(snap, leases, Slice(20)), ElementsAre(0));
  EXPECT_THAT(Pick(snap, leases, Slice(30)), ElementsAre(1));
}

TEST(SelectionSliceTest, BestFitPrefersTheFullestSlicedGpu) {
  MachineSnapshot snap = FourA100();
  std::vector<Lease> leases = {SliceLease(1, "alice", 1, 40), SliceLease(2, "bob", 2, 60)};
  EXPECT_THAT(Pick(snap, leases, Slice(10)), ElementsAre(2));   // 20 GiB left beats 40 GiB left
  EXPECT_THAT(Pick(snap, leases, Slice(30)), ElementsAre(1));   // only GPU 1's 40 GiB holds 30 of the sliced
  EXPECT_THAT(Pick(snap, leases, Slice(50)), ElementsAre(0));   // a fresh GPU when no sliced one holds it
}

TEST(SelectionSliceTest, WholeLeasesAndSlicesExcludeEachOther) {
  MachineSnapshot snap = FourA100();
  std::vector<Lease> leases = {MakeLease(1, "alice", {0, 1, 2}), SliceLease(2, "bob", 3, 10)};
  // A whole-GPU request sees the sliced GPU as taken, with the slice named.
  Result<Selection> whole = Select(snap, leases, Count(1));
  ASSERT_FALSE(whole);
  EXPECT_EQ(whole.error().code, ErrorCode::kBusy);
  auto verdicts = EvaluateGpus(snap, leases, Count(1));
  ASSERT_TRUE(verdicts);
  EXPECT_THAT((*verdicts)[3].reasons, ElementsAre("10 GiB slice leased to bob (lease 2)"));
  // A slice never lands on a GPU leased whole.
  EXPECT_THAT(Pick(snap, leases, Slice(10)), ElementsAre(3));
  auto sliced = EvaluateGpus(snap, leases, Slice(10));
  ASSERT_TRUE(sliced);
  EXPECT_FALSE((*sliced)[0].eligible);
  EXPECT_FALSE((*sliced)[0].slice_room_bytes.has_value());
  EXPECT_EQ((*sliced)[3].slice_room_bytes, 70 * kGiB);
}

TEST(SelectionSliceTest, ProcessesOutsideGpumanCountByTheirMemory) {
  MachineSnapshot snap = FourA100();
  for (int g = 0; g < 4; ++g) {
    AddProcess(snap, g, 100 + g, "carol");
    snap.gpus[g].processes.back().used_memory_bytes = 60 * kGiB;
  }
  // A whole-GPU request calls them busy; a slice counts their 60 GiB and fits in 20.
  EXPECT_FALSE(Select(snap, {}, Count(1)));
  EXPECT_THAT(Pick(snap, {}, Slice(20)), ElementsAre(0));
  Result<Selection> big = Select(snap, {}, Slice(21));
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, ErrorCode::kBusy);
  EXPECT_THAT(big.error().message, ::testing::HasSubstr("less than 21 GiB of declared memory free"));
  // A process the slice's own lease records is its own, not outside gpuman.
  std::vector<Lease> leases = {SliceLease(1, "carol", 0, 30, {100})};
  auto verdicts = EvaluateGpus(snap, leases, Slice(50));
  ASSERT_TRUE(verdicts);
  EXPECT_TRUE((*verdicts)[0].eligible);  // 80 - 30 declared = 50
}

TEST(SelectionSliceTest, ASliceBiggerThanEveryGpuCanNeverBeMet) {
  MachineSnapshot snap = FourA100();
  Result<Selection> r = Select(snap, {}, Slice(100));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(r.error().message, ::testing::HasSubstr("need 100 GiB on 1 GPU, only 0 of 4 can ever be eligible: GPU 0-3 total memory below 100 GiB"));
  auto verdicts = EvaluateGpus(snap, {}, Slice(100));
  ASSERT_TRUE(verdicts);
  EXPECT_THAT((*verdicts)[0].reasons, ElementsAre("total memory 80 GiB < 100 GiB slice"));
}

TEST(SelectionSliceTest, GpusLeftOutOfSlicingAreNeverEligibleForSlices) {
  MachineSnapshot snap = FourA100();
  model::GpuRequest req = Slice(10);
  for (int g = 0; g < 3; ++g) req.not_sliceable[Uuid(g)] = "[share] gpus";
  EXPECT_THAT(Pick(snap, {}, req), ElementsAre(3));
  req.not_sliceable[Uuid(3)] = "[share] gpus";
  Result<Selection> r = Select(snap, {}, req);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(r.error().message, ::testing::HasSubstr("not for slices"));
}

TEST(SelectionSliceTest, ASliceOfTwoGpusTakesRoomOnBoth) {
  MachineSnapshot snap = FourA100();
  std::vector<Lease> leases = {SliceLease(1, "alice", 0, 70), SliceLease(2, "bob", 2, 50)};
  EXPECT_THAT(Pick(snap, leases, Slice(20, 2)), ElementsAre(1, 2));  // 2 (30 left) is sliced, then a fresh one
  EXPECT_FALSE(Select(snap, leases, Slice(0)));  // a slice of nothing is no request
}

// ---------------------------------------------------------------------------
// MPS (docs/share.md, "MPS"): one control daemon per GPU serves one Unix user at a time.

model::GpuRequest MpsSlice(int64_t gib, uint32_t uid) {
  model::GpuRequest req = Slice(gib);
  req.mps = true;
  req.uid = uid;
  return req;
}

Lease MpsLease(int64_t id, const std::string& user, int gpu, int64_t gib) {
  Lease lease = SliceLease(id, user, gpu, gib);
  lease.mps = true;
  return lease;
}

TEST(SelectionMpsTest, AGpuRunningMpsForOneUserTakesOnlyThatUsersMpsSlices) {
  MachineSnapshot snap = FourA100();
  // alice (uid 1001) runs MPS on GPU 2 with 10 GiB; bob's plain slice has GPU 1.
  std::vector<Lease> leases = {MpsLease(1, "alice", 2, 10), SliceLease(2, "bob", 1, 10)};
  // alice's next MPS slice joins her GPU (best fit would pick either sliced GPU; GPU 1
  // has plain slices, which MPS clients do not share a GPU with).
  EXPECT_THAT(Pick(snap, leases, MpsSlice(10, 1001)), ElementsAre(2));
  // Another user's MPS slice goes elsewhere, and not beside bob's plain slice either.
  EXPECT_THAT(Pick(snap, leases, MpsSlice(10, 2000)), ElementsAre(0));
  // A plain slice never goes beside MPS clients, not even alice's own.
  EXPECT_THAT(Pick(snap, {leases[0]}, Slice(10)), ElementsAre(0));  // best fit alone would say 2
  auto plain = EvaluateGpus(snap, leases, Slice(10));
  ASSERT_TRUE(plain);
  EXPECT_THAT((*plain)[2].reasons, ElementsAre("runs MPS for alice; only their --mps slices may share it"));
  // Confined to GPU 2, the other user's request waits with MPS's rule as the reason.
  model::GpuRequest other = MpsSlice(10, 2000);
  other.gpus = std::vector<std::string>{Uuid(2)};
  Result<Selection> refused = Select(snap, leases, other);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kBusy);
  EXPECT_THAT(refused.error().message, HasSubstr("GPU 2 runs MPS for alice; MPS serves one user at a time"));
  // And an MPS slice confined to GPU 1 waits for bob's plain slice.
  other.gpus = std::vector<std::string>{Uuid(1)};
  refused = Select(snap, leases, other);
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.error().message, HasSubstr("sliced without MPS"));
}

TEST(SelectionMpsTest, MpsRequestsAreOneGpuAndGpuShareNeedsMps) {
  MachineSnapshot snap = FourA100();
  model::GpuRequest two = MpsSlice(10, 1);
  two.count = 2;
  Result<Selection> r = Select(snap, {}, two);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  model::GpuRequest share = Slice(10);
  share.gpu_share_percent = 50;
  r = Select(snap, {}, share);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "--gpu-share needs --mps");
  model::GpuRequest bad = MpsSlice(10, 1);
  bad.gpu_share_percent = 0;
  EXPECT_FALSE(Select(snap, {}, bad));
  bad.gpu_share_percent = 100;
  EXPECT_TRUE(Select(snap, {}, bad));
}


}  // namespace
}  // namespace gpuman::policy

// ---------------------------------------------------------------------------
// --prefer fastest (docs/selection.md, "The fastest GPU").

namespace gpuman::policy {
namespace {

// The workstation with peak inputs: the 4090 is the fastest, then the A6000, the 3090,
// the T4; GPU 1's cores are unknown (an old driver), so it ranks last.
MachineSnapshot RatedWorkstation() {
  MachineSnapshot snap = Workstation();
  const int64_t cores[] = {16384, 10752, 10496, 2560};
  const int64_t mhz[] = {3105, 2100, 2100, 1590};
  for (size_t i = 0; i < snap.gpus.size(); ++i) {
    snap.gpus[i].cuda_cores = cores[i];
    snap.gpus[i].clocks.sm_max_mhz = mhz[i];
  }
  return snap;
}

TEST(SelectionPreferFastestTest, TheFastestEligibleGpusComeFirst) {
  MachineSnapshot snap = RatedWorkstation();
  model::GpuRequest req;
  req.count = 1;
  EXPECT_EQ(Pick(snap, {}, req), std::vector<int>{1}) << "without a preference: by placement (fragmentation, memory)";
  req.prefer_fastest = true;
  EXPECT_EQ(Pick(snap, {}, req), std::vector<int>{0});
  req.exclude = {Uuid(0)};  // the 4090 is out; with the 3090 clocked lower, the A6000 is next
  snap.gpus[2].clocks.sm_max_mhz = 1700;  // the 3090 slower than the A6000
  EXPECT_EQ(Pick(snap, {}, req), std::vector<int>{1});
  req.count = 2;  // the two fastest eligible: the A6000 and the 3090, not the T4
  EXPECT_EQ(Pick(snap, {}, req), (std::vector<int>{1, 2}));
  snap.gpus[1].cuda_cores.reset();  // unknown ranks last: the 3090 and the T4
  EXPECT_EQ(Pick(snap, {}, req), (std::vector<int>{2, 3}));
}

// What `gpuman bench` measured ranks a GPU by its share of the FP32 peak it reached
// (model::SpeedScore): a 4090 measured at a fifth of its peak falls behind the A6000.
TEST(SelectionPreferFastestTest, MeasuredFiguresRankWhereTheyExist) {
  MachineSnapshot snap = RatedWorkstation();
  model::GpuRequest req;
  req.count = 1;
  req.prefer_fastest = true;
  ASSERT_EQ(Pick(snap, {}, req), std::vector<int>{0});
  req.measured_fp32_tflops[Uuid(0)] = 20;  // peak 101.7
  EXPECT_EQ(Pick(snap, {}, req), std::vector<int>{1});
  req.measured_fp32_tflops[Uuid(0)] = 101;  // as on paper: first again
  EXPECT_EQ(Pick(snap, {}, req), std::vector<int>{0});
  req.measured_fp32_tflops = {{"GPU-not-here", 1000}};  // another machine's GPU: nothing changes
  EXPECT_EQ(Pick(snap, {}, req), std::vector<int>{0});
  req.prefer_fastest = false;  // no preference: figures are not read
  req.measured_fp32_tflops = {{Uuid(0), 1}};
  EXPECT_EQ(Pick(snap, {}, req), std::vector<int>{1});
}

TEST(SelectionPreferFastestTest, ASliceGoesToTheFastestGpuWithRoom) {
  MachineSnapshot snap = RatedWorkstation();
  model::GpuRequest req;
  req.count = 1;
  req.gpu_memory_bytes = 20 * kGiB;
  req.prefer_fastest = true;
  EXPECT_EQ(Pick(snap, {}, req), std::vector<int>{0});
  req.gpu_memory_bytes = 30 * kGiB;  // only the A6000 (48 GiB) holds it
  EXPECT_EQ(Pick(snap, {}, req), std::vector<int>{1});
}

}  // namespace
}  // namespace gpuman::policy

namespace gpuman::policy {
namespace {

// An H100 split 3g.40gb + 2x 2g.20gb (GPU 0) beside three whole GPUs (h100-mig).
model::MachineSnapshot MigMachine() {
  model::MachineSnapshot snap = ::gpuman::testing::SnapshotBuilder()
                                    .Model("NVIDIA H100 80GB HBM3", "9.0")
                                    .MemoryGiB(80)
                                    .Add(4)
                                    .Build();
  snap.gpus[0].mig_mode_current = true;
  const char* profiles[] = {"3g.40gb", "2g.20gb", "2g.20gb"};
  for (int i = 0; i < 3; ++i) {
    model::MigDevice m;
    m.index = i;
    m.uuid = "MIG-" + std::to_string(i);
    m.parent_uuid = snap.gpus[0].uuid.value_or("");
    m.profile = profiles[i];
    m.memory_total_bytes = (i == 0 ? 40 : 20) * (int64_t{1} << 30);
    m.memory_used_bytes = 0;
    snap.gpus[0].mig_devices.push_back(m);
  }
  return snap;
}

model::GpuRequest Mig(const std::string& profile, int count = 1) {
  model::GpuRequest r;
  r.count = count;
  r.mig_profile = profile;
  return r;
}

TEST(SelectionMigTest, MigDevicesOfTheProfileAreTheUnits) {
  // Given MIG-1 already leased, a second 2g.20gb request gets MIG-2 (the GPU's index 0).
  model::MachineSnapshot snap = MigMachine();
  model::Lease held;
  held.id = 7;
  held.user = "alice";
  held.gpu_uuids = {"MIG-1"};
  auto got = Select(snap, {held}, Mig("2g.20gb"));
  ASSERT_TRUE(got.has_value()) << got.error().message;
  EXPECT_THAT(got->uuids, ElementsAre("MIG-2"));
  EXPECT_THAT(got->indices, ElementsAre(0));
  // And a third is busy: both 2g.20gb leased.
  held.gpu_uuids = {"MIG-1", "MIG-2"};
  auto none = Select(snap, {held}, Mig("2g.20gb"));
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code, ErrorCode::kBusy);
  // The message counts and names MIG devices, not their parent GPU twice.
  EXPECT_EQ(none.error().message,
            "need 1 MIG device of profile 2g.20gb, 0 eligible: MIG 1 on GPU 0, MIG 2 on GPU 0 leased to alice (lease 7)");
}

TEST(SelectionMigTest, AGpuInMigModeIsNeverLeasedWhole) {
  model::MachineSnapshot snap = MigMachine();
  model::GpuRequest whole;
  whole.count = 4;
  auto got = Select(snap, {}, whole);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code, ErrorCode::kNotFound);
  EXPECT_NE(got.error().message.find("GPU 0 in MIG mode"), std::string::npos) << got.error().message;
  whole.count = 1;
  auto v = EvaluateGpus(snap, {}, whole);
  ASSERT_TRUE(v.has_value());
  EXPECT_THAT((*v)[0].reasons, ElementsAre("in MIG mode: lease its MIG devices (--mig PROFILE)"));
  auto one = Select(snap, {}, whole);
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->indices, std::vector<int>{1});
}

TEST(SelectionMigTest, UnknownProfileListsTheProfilesHere) {
  auto got = Select(MigMachine(), {}, Mig("1g.10gb"));
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(got.error().message, "--mig: no MIG device of profile 1g.10gb here; the profiles here: 2g.20gb, 3g.40gb");
  model::MachineSnapshot plain = MigMachine();
  plain.gpus[0].mig_devices.clear();
  plain.gpus[0].mig_mode_current = false;
  auto none = Select(plain, {}, Mig("1g.10gb"));
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().message, "--mig: this machine has no MIG devices (no GPU is in MIG mode)");
}

TEST(SelectionMigTest, MigUuidsInGpusAndExclusionsOfTheParent) {
  model::MachineSnapshot snap = MigMachine();
  model::GpuRequest by_uuid;
  by_uuid.gpus = std::vector<std::string>{"MIG-0"};
  auto got = Select(snap, {}, by_uuid);
  ASSERT_TRUE(got.has_value()) << got.error().message;
  EXPECT_THAT(got->uuids, ElementsAre("MIG-0"));
  // Excluding (or not allowing) the parent GPU excludes its MIG devices.
  model::GpuRequest r = Mig("3g.40gb");
  r.exclude = {snap.gpus[0].uuid.value()};
  auto excluded = Select(snap, {}, r);
  ASSERT_FALSE(excluded.has_value());
  EXPECT_EQ(excluded.error().code, ErrorCode::kNotFound);
}

TEST(SelectionMigTest, SlicesOnAMigOnlyMachineAreOneLine) {
  model::MachineSnapshot snap = MigMachine();
  snap.gpus.resize(1);
  model::GpuRequest slice;
  slice.gpu_memory_bytes = int64_t{5} << 30;
  auto got = Select(snap, {}, slice);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().message,
            "--gpu-memory: every GPU here is in MIG mode; lease MIG devices instead (--mig 2g.20gb|3g.40gb)");
}

}  // namespace
}  // namespace gpuman::policy
