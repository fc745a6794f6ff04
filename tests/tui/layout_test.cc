#include "tui/layout.h"

#include <gtest/gtest.h>

#include "support/golden.h"
#include "tui/text.h"
#include "tui_fixtures.h"

namespace gpuman::tui {
namespace {

using testing::kGiB;
using testing::kNowMs;
using testing::Machine;
using testing::MakeFrame;

struct Screen {
  TopModel model;
  UiState ui;
  LayoutOptions opts;
  Identity me{1001, false};

  Screen() {
    opts.now_unix_ms = kNowMs;
    opts.me = me;
    model.Ingest(MakeFrame(1, Machine()));
  }
  LayoutResult Render(int w, int h) {
    auto rows = VisibleRows(model.rows(), ui, me);
    SyncSelection(ui, rows);
    return RenderTop(model, ui, rows, opts, w, h);
  }
};

int FindRow(const Grid& g, const std::string& needle) {
  for (int r = 0; r < g.height(); ++r) {
    if (g.RowText(r).find(needle) != std::string::npos) return r;
  }
  return -1;
}

void ExpectFits(const Grid& g, int w, int h) {
  ASSERT_EQ(g.width(), w);
  ASSERT_EQ(g.height(), h);
  for (int r = 0; r < h; ++r) {
    const std::string text = g.RowText(r);
    EXPECT_LE(TextWidth(text), w) << "row " << r << ": " << text;
    // Every row decodes cleanly: no code point was cut.
    size_t pos = 0;
    while (pos < text.size()) EXPECT_NE(DecodeUtf8(text, pos), U'\uFFFD') << "row " << r;
  }
}

TEST(LayoutTest, Fits80x24AndShowsEveryGpuAndProcess) {
  for (bool unicode : {false, true}) {
    Screen s;
    s.opts.unicode = unicode;
    auto laid = s.Render(80, 24);
    const Grid& g = laid.grid;
    ExpectFits(g, 80, 24);
    EXPECT_NE(g.RowText(0).find("gpuman top"), std::string::npos);
    EXPECT_NE(g.RowText(0).find("4 GPUs"), std::string::npos);
    for (const char* name : {" 0 A100-SXM4-80GB", " 1 A100-SXM4-80GB", " 3 A100-SXM4-80GB"}) {
      EXPECT_GE(FindRow(g, name), 1) << name << "\n" << g.Text();
    }
    EXPECT_GE(FindRow(g, "71G/80G"), 0) << g.Text();
    EXPECT_GE(FindRow(g, "TEMP"), 0);
    for (const char* pid : {"4242", "4243", "5000", "777"}) EXPECT_GE(FindRow(g, pid), 0) << pid;
    EXPECT_GE(FindRow(g, "python train.py --epochs 90"), 0);
    EXPECT_GE(FindRow(g, "(not in this PID namespace)"), 0);
    EXPECT_GE(FindRow(g, "LEASES & JOBS: none"), 0);
    EXPECT_NE(g.RowText(23).find("q quit"), std::string::npos) << g.RowText(23);
    EXPECT_EQ(laid.process_rows, 24 - 2 - 8 - 1 - 1);
  }
}

TEST(LayoutTest, ProcessesSortedByMemoryAndSelectedRowHighlighted) {
  Screen s;
  auto laid = s.Render(80, 24);
  const Grid& g = laid.grid;
  const int header = FindRow(g, "GPU-MEM");
  ASSERT_GT(header, 0);
  EXPECT_NE(g.RowText(header + 1).find("4242"), std::string::npos);
  EXPECT_NE(g.RowText(header + 2).find("5000"), std::string::npos);
  EXPECT_EQ(g.At(header + 1, 0).style, Style::kSelected);
  EXPECT_EQ(g.At(header + 2, 0).style, Style::kNormal);
  s.ui.sort = SortKey::kPid;
  const Grid g2 = s.Render(80, 24).grid;
  EXPECT_NE(g2.RowText(header + 1).find(" 777"), std::string::npos) << g2.Text();
}

TEST(LayoutTest, AsciiBarsShowTheFraction) {
  EXPECT_EQ(BarText(0.5, 12, false), "[|||||     ]");
  EXPECT_EQ(BarText(0, 4, false), "[  ]");
  EXPECT_EQ(BarText(1.7, 4, false), "[||]");  // clamped
  EXPECT_EQ(BarText(0.5, 4, true), "██··");
  EXPECT_EQ(BarText(1.0 / 16, 2, true), "▏·");
  EXPECT_EQ(TextWidth(BarText(0.33, 17, true)), 17);
  Screen s;
  const Grid g = s.Render(80, 24).grid;
  const int gpu1 = FindRow(g, " 1 A100");
  ASSERT_GE(gpu1, 0);
  const std::string row = g.RowText(gpu1);
  // UTIL bar 97 % of 14 inner cells -> 14 bars; MEM 71/80 -> 12 bars.
  EXPECT_NE(row.find("[||||||||||||||] 97%"), std::string::npos) << row;
  EXPECT_NE(row.find("[||||||||||||  ] 71G/80G"), std::string::npos) << row;
  const int gpu0 = FindRow(g, " 0 A100");
  EXPECT_NE(g.RowText(gpu0).find("[              ]  0%"), std::string::npos) << g.RowText(gpu0);
}

TEST(LayoutTest, WideTerminalAddsColumnsAndTwoSparklines) {
  Screen s;
  auto laid = s.Render(160, 40);
  ExpectFits(laid.grid, 160, 40);
  EXPECT_GE(FindRow(laid.grid, "TYPE"), 0);
  EXPECT_GE(FindRow(laid.grid, "AGE"), 0);
  EXPECT_GE(FindRow(laid.grid, " mem "), 0);
  EXPECT_GE(FindRow(laid.grid, "1h"), 0);  // process age
}

// Host CPU % and RSS per process, as nvitop shows them, from 140 columns on.
TEST(LayoutTest, WiderTerminalShowsHostCpuAndRss) {
  Screen s;
  auto f = std::make_shared<Frame>(*MakeFrame(2, Machine()));
  f->host[4242] = {0, 7, int64_t{3} << 30};
  s.model.Ingest(f);
  auto f3 = std::make_shared<Frame>(*f);
  f3->sequence = 3;
  f3->taken_at_unix_ms += 1000;
  f3->host[4242] = {25, 7, int64_t{3} << 30};  // 25 ticks at 100/s in 1 s
  s.model.Ingest(f3);
  auto laid = s.Render(160, 40);
  ExpectFits(laid.grid, 160, 40);
  const int header = FindRow(laid.grid, "CPU%");
  ASSERT_GE(header, 0) << laid.grid.Text();
  EXPECT_NE(laid.grid.RowText(header).find("RSS"), std::string::npos);
  const int row = FindRow(laid.grid, " 4242 ");
  ASSERT_GE(row, 0) << laid.grid.Text();
  EXPECT_NE(laid.grid.RowText(row).find(" 25.0     3G "), std::string::npos) << laid.grid.RowText(row);
  EXPECT_EQ(FindRow(s.Render(120, 40).grid, "CPU%"), -1) << "not at 120 columns";
}

TEST(LayoutTest, ManyGpusGoCompactAndStillFit) {
  Screen s;
  auto snap = Machine();
  for (int i = 4; i < 8; ++i) snap.gpus.push_back(testing::Gpu(i, 10 * i, i, 40, 100));
  s.model.Ingest(MakeFrame(2, snap));
  auto laid = s.Render(80, 24);
  ExpectFits(laid.grid, 80, 24);
  for (int i = 0; i < 8; ++i) EXPECT_GE(FindRow(laid.grid, " " + std::to_string(i) + " [") , 0) << i << laid.grid.Text();
  EXPECT_EQ(FindRow(laid.grid, "TEMP"), -1);  // compact rows
  EXPECT_GE(FindRow(laid.grid, "4242"), 0);
  // Twenty GPUs do not fit in 24 rows: the last line says how many are left out.
  for (int i = 8; i < 20; ++i) snap.gpus.push_back(testing::Gpu(i, 0, 0, 30, 50));
  s.model.Ingest(MakeFrame(3, snap));
  laid = s.Render(80, 24);
  ExpectFits(laid.grid, 80, 24);
  EXPECT_GE(FindRow(laid.grid, "more GPUs"), 0) << laid.grid.Text();
  EXPECT_GE(FindRow(laid.grid, "PID"), 0);
}

// GPU 2 drained by an admin: its bar line carries the mark, the reason is shown beside it.
std::shared_ptr<const Frame> DrainedFrame(uint64_t seq, model::MachineSnapshot snap) {
  auto f = std::make_shared<Frame>(*MakeFrame(seq, std::move(snap)));
  f->drains = {{"GPU-00000002-aaaa-bbbb-cccc-dddddddddddd", "fan noise", 0, "root", kNowMs - 60000}};
  return f;
}

TEST(LayoutTest, DrainedGpuIsMarkedOnItsBarLine) {
  for (int width : {80, 140}) {
    Screen s;
    s.model.Ingest(DrainedFrame(2, Machine()));
    auto laid = s.Render(width, 24);
    ExpectFits(laid.grid, width, 24);
    const int bar = FindRow(laid.grid, " 2 A100");
    ASSERT_GE(bar, 1) << laid.grid.Text();
    EXPECT_NE(laid.grid.RowText(bar).find("DRAINED"), std::string::npos) << laid.grid.RowText(bar);
    EXPECT_NE(laid.grid.RowText(bar).find("UTIL"), std::string::npos) << "the bars stay";
    EXPECT_NE(laid.grid.RowText(bar + 1).find("DRAINED: fan noise (by root)"), std::string::npos)
        << laid.grid.RowText(bar + 1);
    // Only that GPU.
    EXPECT_EQ(laid.grid.RowText(FindRow(laid.grid, " 1 A100")).find("DRAINED"), std::string::npos);
  }
  // Compact rows (many GPUs): the mark and reason still show on the GPU's one line.
  Screen s;
  auto snap = Machine();
  for (int i = 4; i < 8; ++i) snap.gpus.push_back(testing::Gpu(i, 10 * i, i, 40, 100));
  s.model.Ingest(DrainedFrame(3, snap));
  auto laid = s.Render(100, 24);
  ExpectFits(laid.grid, 100, 24);
  const int row = FindRow(laid.grid, " 2 [");
  ASSERT_GE(row, 1) << laid.grid.Text();
  EXPECT_NE(laid.grid.RowText(row).find("DRAINED"), std::string::npos) << laid.grid.RowText(row);
}

TEST(LayoutTest, SmallTerminalSaysSo) {
  Screen s;
  auto laid = s.Render(30, 8);
  ExpectFits(laid.grid, 30, 8);
  EXPECT_NE(laid.grid.RowText(0).find("too small"), std::string::npos);
  ExpectFits(s.Render(0, 0).grid, 0, 0);
  ExpectFits(s.Render(40, 10).grid, 40, 10);
}

TEST(LayoutTest, LongAndWideCommandsAreCutCleanly) {
  Screen s;
  auto snap = Machine();
  snap.gpus[1].processes[0].command = "python \xE8\xA8\x93\xE7\xB7\xB4.py " + std::string(200, 'x') + "\xE4\xB8\xAD";
  s.model.Ingest(MakeFrame(2, snap));
  for (int w : {80, 81, 97, 120, 133}) ExpectFits(s.Render(w, 24).grid, w, 24);
}

TEST(LayoutTest, LeasesPanelShowsHolderSinceAndIdle) {
  Screen s;
  model::Lease l;
  l.id = 7;
  l.uid = 1001;
  l.user = "alice";
  l.command = "python train.py";
  l.gpu_uuids = {"GPU-00000001-aaaa-bbbb-cccc-dddddddddddd"};
  l.created_unix_ms = kNowMs - 2 * 3600 * 1000;
  l.idle_since_unix_ms = kNowMs - 15 * 60 * 1000;
  model::Job j;
  j.id = 12;
  j.user = "bob";
  j.state = model::JobState::kRunning;
  j.gpu_uuids = {"GPU-00000002-aaaa-bbbb-cccc-dddddddddddd"};
  j.started_unix_ms = kNowMs - 60000;
  j.name = "sweep";
  auto f = MakeFrame(2, Machine(), {l}, {j});
  const_cast<Frame&>(*f).has_daemon = true;
  s.model.Ingest(f);
  s.opts.utc_offset_s = 0;
  const Grid g = s.Render(80, 24).grid;
  ExpectFits(g, 80, 24);
  const int lease = FindRow(g, "lease 7   held");
  ASSERT_GE(lease, 0) << g.Text();
  const std::string lr = g.RowText(lease);
  EXPECT_NE(lr.find("alice"), std::string::npos);
  EXPECT_NE(lr.find("05:06 2h"), std::string::npos) << lr;  // since 05:06 UTC, 2 h ago
  EXPECT_NE(lr.find("15m"), std::string::npos) << lr;
  const int job = FindRow(g, "job 12    running");
  ASSERT_GE(job, 0);
  EXPECT_NE(g.RowText(job).find("running"), std::string::npos);
  EXPECT_NE(g.RowText(job).find(" - "), std::string::npos) << g.RowText(job);  // not idle
  // The process table names the holders.
  const int p4242 = FindRow(g, " 4242 ");
  EXPECT_NE(g.RowText(p4242).find("lease 7"), std::string::npos);
  EXPECT_NE(g.RowText(FindRow(g, " 5000 ")).find("job 12"), std::string::npos);
}

TEST(LayoutTest, StaleDataAndErrorsShowInTheTitle) {
  Screen s;
  s.opts.now_unix_ms = kNowMs + 20000;
  EXPECT_NE(s.Render(80, 24).grid.RowText(0).find("data 20s old"), std::string::npos);
  auto failed = std::make_shared<Frame>();
  failed->sequence = 5;
  failed->taken_at_unix_ms = kNowMs;
  failed->snapshot_error = "nvmlDeviceGetCount: unknown error";
  s.model.Ingest(failed);
  const Grid g = s.Render(80, 24).grid;
  EXPECT_NE(g.RowText(0).find("NVML: nvmlDeviceGetCount"), std::string::npos) << g.RowText(0);
  EXPECT_GE(FindRow(g, "4242"), 0);  // the last good data stays
}

TEST(LayoutTest, ScrollFollowsTheSelection) {
  Screen s;
  auto snap = Machine();
  for (uint32_t pid = 100; pid < 140; ++pid) {
    snap.gpus[0].processes.push_back(testing::Proc(pid, 1001, "alice", 1, 1, "worker"));
  }
  s.model.Ingest(MakeFrame(2, snap));
  s.ui.sort = SortKey::kPid;
  s.ui.selected = 30;
  s.ui.selected_key.reset();
  auto laid = s.Render(80, 24);
  EXPECT_EQ(laid.scroll, 30 - laid.process_rows + 1);
  const int sel = FindRow(laid.grid, "    130 ");  // sorted by pid: 100..139 first
  ASSERT_GE(sel, 0) << laid.grid.Text();
  EXPECT_EQ(laid.grid.At(sel, 0).style, Style::kSelected);
  EXPECT_GE(FindRow(laid.grid, "more"), 0);
}

TEST(LayoutTest, PromptsAndHelp) {
  Screen s;
  s.ui.mode = Mode::kChooseSignal;
  s.ui.target.pid = 4242;
  s.ui.target.command = "python train.py";
  Grid g = s.Render(80, 24).grid;
  EXPECT_NE(g.RowText(23).find("Signal pid 4242"), std::string::npos) << g.RowText(23);
  EXPECT_NE(g.RowText(23).find("K KILL"), std::string::npos);
  s.ui.mode = Mode::kConfirmKill;
  s.ui.confirm_text = "pid 4242 belongs to alice";
  s.ui.signal = 9;
  g = s.Render(80, 24).grid;
  EXPECT_NE(g.RowText(23).find("belongs to alice. Send SIGKILL anyway? y/N"), std::string::npos) << g.RowText(23);
  s.ui.mode = Mode::kHelp;
  g = s.Render(80, 24).grid;
  ExpectFits(g, 80, 24);
  EXPECT_GE(FindRow(g, "gpuman top: keys"), 0);
  EXPECT_GE(FindRow(g, "signal the selected process"), 0);
}

// A GPU in MIG mode (docs/top.md): its MIG devices and their holders on a line under the
// GPU in the full view, in the history's place in the compact one.
struct MigScreen : Screen {
  MigScreen() {
    model::Lease mig;
    mig.id = 7;
    mig.uid = 1001;
    mig.user = "alice";
    mig.kind = "run";
    mig.command = "python infer.py";
    mig.created_unix_ms = kNowMs - 600 * 1000;
    mig.gpu_uuids = {"MIG-1"};
    mig.processes = {{6100, 1}};
    model::Lease mps;
    mps.id = 8;
    mps.uid = 1002;
    mps.user = "bob";
    mps.kind = "run";
    mps.processes = {{5000, 1}};
    mps.command = "./serve --port 8000";
    mps.created_unix_ms = kNowMs - 3600 * 1000;
    mps.gpu_uuids = {"GPU-00000001-aaaa-bbbb-cccc-dddddddddddd"};
    mps.gpu_memory_bytes = 40 * kGiB;
    mps.mps = true;
    mps.gpu_share_percent = 25;
    model.Ingest(MakeFrame(2, testing::MigMachine(), {mig, mps}));
  }
};

TEST(LayoutTest, MigDevicesAndMpsLeasesGolden) {
  MigScreen s;
  const Grid g = s.Render(100, 30).grid;
  ExpectFits(g, 100, 30);
  EXPECT_TRUE(test_support::MatchesGolden("tui/golden/top_mig_100x30.txt", g.Text()));
}

TEST(LayoutTest, FullViewShowsAMigLineUnderTheGpu) {
  MigScreen s;
  const Grid g = s.Render(100, 30).grid;
  const int gpu0 = FindRow(g, " 0 H100 80GB HBM3");
  ASSERT_GE(gpu0, 1) << g.Text();
  EXPECT_NE(g.RowText(gpu0 + 2).find("MIG 1/3 leased: 2g.20gb alice (lease 7); free: 3g.40gb, 2g.20gb"),
            std::string::npos)
      << g.Text();
  EXPECT_EQ(FindRow(g, " 1 H100 80GB HBM3"), gpu0 + 3) << g.Text();  // after the MIG line
  EXPECT_GE(FindRow(g, "0:2g.20gb"), 0) << g.Text();
  EXPECT_GE(FindRow(g, "1:40G MPS 25%"), 0) << g.Text();
}

TEST(LayoutTest, CompactViewShowsTheMigLineInTheHistorysPlace) {
  MigScreen s;
  const Grid g = s.Render(100, 16).grid;
  ExpectFits(g, 100, 16);
  const int gpu0 = FindRow(g, "MIG 1/3 leased: 2g.20gb alice");
  ASSERT_GE(gpu0, 1) << g.Text();
  EXPECT_EQ(g.RowText(gpu0).rfind("  0 ", 0), 0u) << g.RowText(gpu0);  // on GPU 0's own line
  EXPECT_EQ(FindRow(g, "TEMP"), -1) << g.Text();                     // compact: one line a GPU
}

TEST(LayoutTest, ShortBytes) {
  EXPECT_EQ(ShortBytes(std::nullopt), "-");
  EXPECT_EQ(ShortBytes(512 * 1024 * 1024), "512M");
  EXPECT_EQ(ShortBytes(71 * kGiB), "71G");
  EXPECT_EQ(ShortBytes(kGiB + kGiB / 2), "1.5G");
  EXPECT_EQ(ShortBytes(141 * kGiB), "141G");
  EXPECT_EQ(ShortBytes(2048 * kGiB), "2T");
}

}  // namespace
}  // namespace gpuman::tui
