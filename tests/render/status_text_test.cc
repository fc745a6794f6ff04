#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "render/format.h"
#include "render/status_fixtures.h"
#include "render/status_view.h"
#include "support/golden.h"

namespace gpuman::render {
namespace {

using namespace testing_fixtures;
using test_support::MatchesGolden;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string Render(int width, bool color, StatusOptions opts = {}) {
  return RenderStatusText(FourGpuMachine(), opts, TerminalInfo{width, color});
}

StatusOptions Simulated() {
  StatusOptions opts;
  opts.simulated = true;
  opts.scenario = "busy-node";
  return opts;
}

// ---- Golden files ----------------------------------------------------------------

TEST(StatusTextGoldenTest, Width80) {
  EXPECT_TRUE(MatchesGolden("render/golden/status_w80.txt", Render(80, false)));
}

TEST(StatusTextGoldenTest, Width140) {
  EXPECT_TRUE(MatchesGolden("render/golden/status_w140.txt", Render(140, false)));
}

TEST(StatusTextGoldenTest, Width80Color) {
  EXPECT_TRUE(MatchesGolden("render/golden/status_w80_color.txt", Render(80, true)));
}

TEST(StatusTextGoldenTest, Width140ColorSimulated) {
  EXPECT_TRUE(MatchesGolden("render/golden/status_w140_color_simulated.txt",
                            Render(140, true, Simulated())));
}

TEST(StatusTextGoldenTest, Width80Simulated) {
  EXPECT_TRUE(
      MatchesGolden("render/golden/status_w80_simulated.txt", Render(80, false, Simulated())));
}

TEST(StatusTextGoldenTest, Width80NoProcesses) {
  StatusOptions opts;
  opts.show_processes = false;
  EXPECT_TRUE(MatchesGolden("render/golden/status_w80_no_processes.txt", Render(80, false, opts)));
}

TEST(StatusTextGoldenTest, NoGpus) {
  model::MachineSnapshot snap;
  snap.taken_at_unix_ms = kTakenAtMs;
  EXPECT_TRUE(MatchesGolden("render/golden/status_no_gpus.txt",
                            RenderStatusText(snap, {}, TerminalInfo{80, false})));
}

// GPU 0 (healthy) drained by an admin, GPU 2 (lost) by the health watch.
StatusOptions Drained() {
  StatusOptions opts;
  opts.drains = {
      {"GPU-3f2a9c1d-5b6e-4f70-8a91-0c2d3e4f5a6b", "fan noise", 1000, "alice", kTakenAtMs - 3600000},
      {"GPU-c0ffee00-1234-5678-9abc-def012345678", "health: gpu_lost", 0, "root", kTakenAtMs - 60000},
  };
  return opts;
}

TEST(StatusTextGoldenTest, Width80Drained) {
  EXPECT_TRUE(MatchesGolden("render/golden/status_w80_drained.txt", Render(80, false, Drained())));
}

TEST(StatusTextTest, DrainedGpuIsNotOkAndSaysWhy) {
  const std::vector<std::string> lines = Lines(Render(80, false, Drained()));
  ASSERT_GE(lines.size(), 4u);
  // GPU 0's row: DRAINED where "ok" was, and the reason with who and since when beneath.
  EXPECT_TRUE(lines[2].ends_with("DRAINED")) << lines[2];
  EXPECT_EQ(lines[3], "    drained: fan noise (by alice since 2024-05-01T11:00:00Z)");
  // GPU 1 is not drained: still ok.
  const std::string text = Render(80, false, Drained());
  EXPECT_NE(text.find("GPU-8e0b7a42  97%  71.2/80.0 GiB   78C  380/400 W  ok\n"), std::string::npos) << text;
  // The lost GPU stays LOST, and its drain shows too.
  EXPECT_NE(text.find("LOST\n    drained: health: gpu_lost (by root since 2024-05-01T11:59:00Z)\n"),
            std::string::npos)
      << text;
  // Without drains nothing says DRAINED.
  EXPECT_EQ(Render(80, false).find("DRAINED"), std::string::npos);
  EXPECT_EQ(Render(80, false).find("drained"), std::string::npos);
}

// ---- Properties ------------------------------------------------------------------

TEST(StatusTextTest, NoLineExceedsTerminalWidth) {
  for (int width : {80, 90, 100, 119, 120, 140, 200}) {
    for (const StatusOptions& opts : {StatusOptions{}, Simulated()}) {
      const std::string text = Render(width, false, opts);
      ASSERT_FALSE(text.empty());
      EXPECT_EQ(text.back(), '\n');
      for (const std::string& line : Lines(text)) {
        EXPECT_LE(DisplayWidth(line), width) << "width " << width << ": " << line;
      }
    }
  }
}

TEST(StatusTextTest, NarrowTerminalIsTreatedAs80Columns) {
  EXPECT_EQ(Render(40, false), Render(80, false));
}

TEST(StatusTextTest, OnlyAsciiAndEllipsis) {
  std::string text = Render(80, false) + Render(140, false);
  for (size_t pos; (pos = text.find("\xE2\x80\xA6")) != std::string::npos;) {
    text.erase(pos, 3);
  }
  for (char c : text) {
    EXPECT_TRUE(static_cast<unsigned char>(c) < 0x80 && (c >= 0x20 || c == '\n'))
        << "byte " << static_cast<int>(static_cast<unsigned char>(c));
  }
}

TEST(StatusTextTest, ColourOnlyWhenAsked) {
  EXPECT_EQ(Render(80, false).find('\x1b'), std::string::npos);
  EXPECT_EQ(Render(140, false, Simulated()).find('\x1b'), std::string::npos);
  const std::string colored = Render(80, true, Simulated());
  EXPECT_NE(colored.find("\x1b[33;7m[SIMULATED: busy-node]\x1b[0m"), std::string::npos);
  EXPECT_NE(colored.find("\x1b[31m"), std::string::npos);  // busy GPU and unhealthy GPUs
}

TEST(StatusTextTest, SimulatedMarker) {
  EXPECT_EQ(Render(80, false).find("SIMULATED"), std::string::npos);
  const std::vector<std::string> lines = Lines(Render(80, false, Simulated()));
  EXPECT_TRUE(lines.at(0).starts_with("[SIMULATED: busy-node]")) << lines.at(0);

  // A very long scenario name does not push the marker out or the line past the width.
  StatusOptions opts = Simulated();
  opts.scenario = std::string(200, 'x');
  const std::vector<std::string> long_lines = Lines(Render(80, false, opts));
  EXPECT_TRUE(long_lines.at(0).starts_with("[SIMULATED: xxx")) << long_lines.at(0);
  EXPECT_LE(DisplayWidth(long_lines.at(0)), 80);
}

TEST(StatusTextTest, UnknownValuesPrintAsDash) {
  // The lost GPU knows only its identity: every metric column is "-", never 0.
  const std::vector<std::string> lines = Lines(Render(80, false));
  std::string lost;
  for (const std::string& line : lines) {
    if (line.starts_with("  2 ")) lost = line;
  }
  ASSERT_FALSE(lost.empty());
  EXPECT_NE(lost.find("GPU-c0ffee00"), std::string::npos) << lost;
  EXPECT_NE(lost.find("  -  "), std::string::npos) << lost;
  EXPECT_EQ(lost.find('0' + std::string("%")), std::string::npos) << lost;
  EXPECT_EQ(lost.find("0C"), std::string::npos) << lost;
  EXPECT_EQ(lost.find(" W"), std::string::npos) << lost;
  EXPECT_NE(lost.find("LOST"), std::string::npos) << lost;
}

TEST(StatusTextTest, LostGpuShowsProblemText) {
  const std::string text = Render(80, false);
  EXPECT_NE(text.find("    problem: nvmlDeviceGetMemoryInfo_v2: GPU is lost"), std::string::npos)
      << text;
}

TEST(StatusTextTest, ProcessDetails) {
  const std::string text = Render(80, false);
  EXPECT_NE(text.find("(not in this PID namespace)"), std::string::npos);
  EXPECT_NE(text.find("alice"), std::string::npos);
  EXPECT_NE(text.find("python train.py --epochs 100"), std::string::npos);
  // User unknown but uid known: the uid stands in; nothing known: "?".
  EXPECT_NE(text.find("    uid 1234 "), std::string::npos) << text;
  EXPECT_NE(text.find("    ?  "), std::string::npos) << text;
  // The long command line is cut with an ellipsis.
  EXPECT_NE(text.find("\xE2\x80\xA6\n"), std::string::npos);
  // Processes off: no process lines at all.
  StatusOptions opts;
  opts.show_processes = false;
  EXPECT_EQ(Render(80, false, opts).find("alice"), std::string::npos);
}

TEST(StatusTextTest, UnhealthyProblemOnTheRowWhenItFits) {
  model::MachineSnapshot snap = FourGpuMachine();
  snap.gpus = {SparseGpu()};
  const std::string text = RenderStatusText(snap, {}, TerminalInfo{200, false});
  EXPECT_NE(text.find("UNHEALTHY: 2 retired pages pending: reset the GPU\n"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("problem: 2 retired pages"), std::string::npos) << text;
  EXPECT_NE(text.find("    problem: uncorrectable ECC errors since boot: 3"), std::string::npos);
}

TEST(StatusTextTest, NothingIsCutWhenNotATerminal) {
  // A pipe or a file: the same layout as an 80-column terminal (no extra columns), but
  // every line whole: the long command, the long user name, the long GPU name.
  const TerminalInfo pipe{80, false, /*cut_to_width=*/false};
  const std::string text = RenderStatusText(FourGpuMachine(), Simulated(), pipe);
  EXPECT_EQ(text.find("\xE2\x80\xA6"), std::string::npos) << text;
  EXPECT_NE(text.find("--output-dir /scratch/bartholomew/runs/2024-05-01\n"), std::string::npos) << text;
  EXPECT_NE(text.find("bartholomew_long_name  1048577"), std::string::npos) << text;
  EXPECT_NE(text.find("GeForce RTX 4090 Founders Edition Overclocked"), std::string::npos) << text;
  EXPECT_EQ(text.find("FAN"), std::string::npos) << "laid out for 80 columns";
  // The table's columns stay aligned: every GPU row has its UUID where the title says.
  const std::vector<std::string> lines = Lines(text);
  const size_t uuid_at = lines.at(1).find("UUID");
  ASSERT_NE(uuid_at, std::string::npos);
  for (const std::string& line : lines) {
    if (line.size() > 3 && line[0] == ' ' && line[2] != ' ' && line[3] == ' ') {  // "  0 NAME…"
      EXPECT_EQ(line.substr(uuid_at, 4), "GPU-") << line;
    }
  }
  // A wider $COLUMNS still chooses the richer layout.
  EXPECT_NE(RenderStatusText(FourGpuMachine(), {}, TerminalInfo{140, false, false}).find("FAN"), std::string::npos);
}

TEST(StatusTextTest, WideCharactersArePaddedByDisplayWidth) {
  // A user and a command written in CJK and emoji: the PID column stays where it is for
  // everyone, and a cut line is cut by columns, never past the terminal's edge.
  model::MachineSnapshot snap = FourGpuMachine();
  model::GpuProcess& train = snap.gpus[1].processes[0];
  train.user = "\xE7\x8E\x8B\xE8\x8A\xB3";  // 王芳, 4 columns
  train.command = "python \xE8\xAE\xAD\xE7\xBB\x83.py \xF0\x9F\x9A\x80" + std::string(100, 'x');
  snap.gpus[1].processes[2].user = "bob";  // not capped: both users fit USER's width
  for (const TerminalInfo& term : {TerminalInfo{80, false}, TerminalInfo{80, false, false}}) {
    const std::string text = RenderStatusText(snap, {}, term);
    std::vector<std::string> process_lines;
    for (const std::string& line : Lines(text)) {
      if (line.find("41234") != std::string::npos || line.find("1048577") != std::string::npos) {
        process_lines.push_back(line);
      }
      if (term.cut_to_width) EXPECT_LE(DisplayWidth(line), 80) << line;
    }
    ASSERT_EQ(process_lines.size(), 2u) << text;
    const auto pid_end = [](const std::string& line, const std::string& pid) {
      return DisplayWidth(line.substr(0, line.find(pid) + pid.size()));
    };
    EXPECT_EQ(pid_end(process_lines[0], "41234"), pid_end(process_lines[1], "1048577"))
        << process_lines[0] << "\n" << process_lines[1];
  }
}

TEST(StatusTextTest, WideTerminalShowsMoreColumns) {
  const std::string narrow = Render(80, false);
  const std::string wide = Render(140, false);
  EXPECT_EQ(narrow.find("FAN"), std::string::npos);
  EXPECT_NE(wide.find("FAN"), std::string::npos);
  EXPECT_NE(wide.find("PERF"), std::string::npos);
  EXPECT_NE(wide.find("0000:07:00.0"), std::string::npos);
  // The long command gets more of the line when there is room.
  EXPECT_NE(wide.find("--nproc_per_node=8"), std::string::npos);
}

// ---- status --compact ------------------------------------------------------------

model::Lease LeaseOn(int64_t id, std::string user, std::string uuid, std::string kind = "run") {
  model::Lease l;
  l.id = id;
  l.user = std::move(user);
  l.kind = std::move(kind);
  l.gpu_uuids = {std::move(uuid)};
  return l;
}

TEST(StatusCompactTest, OneLinePerGpuWithUsersInline) {
  StatusOptions opts = Drained();
  opts.simulated = true;
  opts.scenario = "busy-node";
  // The header is status's (the simulated marker first); then gpustat's line per GPU, the
  // health marks after the name; users with their memory in all, most first; the nameless
  // process by uid; the process in another namespace as "?".
  const TerminalInfo pipe{80, false, /*cut_to_width=*/false};
  EXPECT_EQ(RenderStatusCompact(FourGpuMachine(), opts, pipe),
            "[SIMULATED: busy-node]  driver 550.54.15  CUDA 12.4  2024-05-01T12:00:00Z\n"
            "[0] A100-SXM4-80GB DRAINED                                  | 34C  0% |  0.5/80.0 GiB |\n"
            "[1] A100-SXM4-80GB                                          | 78C 97% | 71.2/80.0 GiB | alice(40.3G) ?(20G) "
            "bartholomew_long_name(10.5G)\n"
            "[2] A100-SXM4-80GB LOST                                     |   -   - |             - |\n"
            "[3] GeForce RTX 4090 Founders Edition Overclocked UNHEALTHY |   - 55% |    -/24.0 GiB | uid:1234(-)\n");
  // On an 80-column terminal the long name is cut as the table cuts it, and the users
  // where the line ends; the marks stay.
  EXPECT_EQ(RenderStatusCompact(FourGpuMachine(), opts, TerminalInfo{80, false}),
            "[SIMULATED: busy-node]  driver 550.54.15  CUDA 12.4  2024-05-01T12:00:00Z\n"
            "[0] A100-SXM4-80GB DRAINED             | 34C  0% |  0.5/80.0 GiB |\n"
            "[1] A100-SXM4-80GB                     | 78C 97% | 71.2/80.0 GiB | alice(40.3G)\u2026\n"
            "[2] A100-SXM4-80GB LOST                |   -   - |             - |\n"
            "[3] GeForce RTX 4090 Founde\u2026 UNHEALTHY |   - 55% |    -/24.0 GiB | uid:1234(-)\n");
}

TEST(StatusCompactTest, LeasesAndJobsInBrackets) {
  const model::MachineSnapshot snap = FourGpuMachine();
  StatusOptions opts;
  model::Lease idle = LeaseOn(7, "alice", *snap.gpus[0].uuid);
  idle.idle_since_unix_ms = kTakenAtMs - 2 * 3600 * 1000;
  opts.leases = {idle, LeaseOn(12, "alice", *snap.gpus[1].uuid, "job")};
  opts.lease_jobs = {{12, 34}};
  const std::vector<std::string> lines = Lines(RenderStatusCompact(snap, opts, TerminalInfo{200, false}));
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_TRUE(lines[1].ends_with("| [lease 7 alice, IDLE 2h]")) << lines[1];
  EXPECT_TRUE(lines[2].ends_with("| [job 34 alice] alice(40.3G) ?(20G) bartholomew_long_name(10.5G)")) << lines[2];
  // Without processes: the leases only.
  opts.show_processes = false;
  const std::vector<std::string> bare = Lines(RenderStatusCompact(snap, opts, TerminalInfo{200, false}));
  EXPECT_TRUE(bare.at(2).ends_with("| [job 34 alice]")) << bare.at(2);
  EXPECT_TRUE(bare.at(4).ends_with("|")) << bare.at(4);
}

TEST(StatusCompactTest, SlicesShowTheirSizeAndAnOverrun) {
  const model::MachineSnapshot snap = FourGpuMachine();
  const model::GpuProcess& alices = snap.gpus[1].processes.at(0);
  ASSERT_EQ(alices.user, "alice");
  ASSERT_TRUE(alices.uid.has_value());
  StatusOptions opts;
  model::Lease a = LeaseOn(8, "alice", *snap.gpus[1].uuid);
  a.uid = *alices.uid;
  a.gpu_memory_bytes = int64_t{20} << 30;  // her processes use 40.3 GiB
  model::Lease b = LeaseOn(9, "bob", *snap.gpus[1].uuid);
  b.uid = 4321;
  b.gpu_memory_bytes = int64_t{30} << 30;
  opts.leases = {a, b};
  opts.show_processes = false;
  const std::vector<std::string> lines = Lines(RenderStatusCompact(snap, opts, TerminalInfo{200, false}));
  EXPECT_TRUE(lines.at(2).ends_with("| [lease 8 alice 20 GiB OVER] [lease 9 bob 30 GiB]")) << lines.at(2);
}

// MPS leases (docs/share.md "MPS") and MIG devices (docs/share.md "MIG") with their leases.
StatusOptions MpsAndMigLeases() {
  const model::MachineSnapshot snap = MigMachine();
  StatusOptions opts;
  model::Lease mig = LeaseOn(7, "alice", *snap.gpus[0].mig_devices[2].uuid);
  mig.created_unix_ms = kTakenAtMs - 600 * 1000;
  mig.command = "python infer.py";
  model::Lease shared = LeaseOn(8, "bob", *snap.gpus[1].uuid);
  shared.gpu_memory_bytes = int64_t{20} << 30;
  shared.mps = true;
  shared.gpu_share_percent = 25;
  shared.created_unix_ms = kTakenAtMs - 3600 * 1000;
  shared.command = "./serve --port 8000";
  model::Lease plain = LeaseOn(9, "bob", *snap.gpus[1].uuid, "select");
  plain.gpu_memory_bytes = int64_t{10} << 30;
  plain.mps = true;
  plain.created_unix_ms = kTakenAtMs - 1800 * 1000;
  plain.command = "python eval.py";
  opts.leases = {mig, shared, plain};
  return opts;
}

TEST(StatusTextGoldenTest, MpsLeasesAndMigDevices) {
  EXPECT_TRUE(MatchesGolden("render/golden/status_w120_mps_mig.txt",
                            RenderStatusText(MigMachine(), MpsAndMigLeases(), TerminalInfo{120, false})));
}

TEST(StatusTextTest, MpsLeaseLinesSayMpsAndTheThreadShare) {
  const std::string text = RenderStatusText(MigMachine(), MpsAndMigLeases(), TerminalInfo{200, false});
  EXPECT_NE(text.find("lease 8 bob (run, 20 GiB slice, MPS 25%) since "), std::string::npos) << text;
  EXPECT_NE(text.find("lease 9 bob (select, 10 GiB slice, MPS) since "), std::string::npos) << text;
  EXPECT_NE(text.find("MIG 2 2g.20gb MIG-33333333-aaaa-4bbb-8ccc-000000000000: 9 GiB / 19.5 GiB used, "
                      "lease 7 alice (run), 1 process"),
            std::string::npos)
      << text;
  // A lease without MPS says nothing of it.
  EXPECT_EQ(text.find("alice (run, MPS"), std::string::npos) << text;
}

TEST(StatusCompactTest, MpsLeasesAreMarked) {
  const std::vector<std::string> lines =
      Lines(RenderStatusCompact(MigMachine(), MpsAndMigLeases(), TerminalInfo{200, false}));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_TRUE(lines[2].ends_with("| [lease 8 bob 20 GiB MPS 25%] [lease 9 bob 10 GiB MPS]")) << lines[2];
}

TEST(StatusCompactTest, MibAsNvidiaSmiAndGpustat) {
  StatusOptions opts;
  opts.memory_in_mib = true;
  const std::vector<std::string> lines = Lines(RenderStatusCompact(FourGpuMachine(), opts, TerminalInfo{200, false}));
  EXPECT_NE(lines.at(2).find("| 72908/81920 MiB | alice(41260M) ?(20480M) bartholomew_long_name(10752M)"),
            std::string::npos)
      << lines.at(2);
}

TEST(StatusCompactTest, ATerminalCutsThePipeDoesNotAndColourNeverShiftsColumns) {
  model::MachineSnapshot snap = FourGpuMachine();
  snap.gpus[1].processes[0].user = "\xE7\x8E\x8B\xE8\x8A\xB3";  // 王芳
  for (int width : {80, 100}) {
    for (const std::string& line : Lines(RenderStatusCompact(snap, {}, TerminalInfo{width, false}))) {
      EXPECT_LE(DisplayWidth(line), width) << line;
    }
  }
  const std::string whole = RenderStatusCompact(snap, {}, TerminalInfo{80, false, /*cut_to_width=*/false});
  EXPECT_NE(whole.find("\xE7\x8E\x8B\xE8\x8A\xB3(40.3G) ?(20G) bartholomew_long_name(10.5G)\n"), std::string::npos)
      << whole;
  EXPECT_EQ(whole.find("\xE2\x80\xA6"), std::string::npos) << whole;
  // Coloured, the same text once the escapes are taken out.
  std::string colored = RenderStatusCompact(snap, Drained(), TerminalInfo{200, true, false});
  EXPECT_NE(colored.find("\x1b["), std::string::npos);
  for (size_t at; (at = colored.find("\x1b[")) != std::string::npos;) colored.erase(at, colored.find('m', at) + 1 - at);
  EXPECT_EQ(colored, RenderStatusCompact(snap, Drained(), TerminalInfo{200, false, false}));
}

}  // namespace
}  // namespace gpuman::render
