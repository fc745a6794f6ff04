#include "tui/host_process.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "tui/top_model.h"
#include "tui_fixtures.h"

namespace gpuman::tui {
namespace {

struct FakeProc {
  std::string root;
  FakeProc() {
    char tmpl[] = "/tmp/gpuman-host-XXXXXX";
    root = mkdtemp(tmpl);
  }
  ~FakeProc() { std::filesystem::remove_all(root); }
  // A stat line with a command holding spaces and a ')' (the parser must use the last one).
  void Write(uint32_t pid, int64_t utime, int64_t stime, int64_t start, int64_t resident_pages) {
    const std::string dir = root + "/" + std::to_string(pid);
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/stat") << pid << " (py thon) x) S 1 1 1 0 -1 4194560 100 0 0 0 " << utime << " " << stime
                                 << " 0 0 20 0 4 0 " << start << " 1000000 250\n";
    std::ofstream(dir + "/statm") << "5000 " << resident_pages << " 100 1 0 300 0\n";
  }
};

TEST(HostProcessTest, ReadsCpuTicksStartAndRss) {
  FakeProc proc;
  proc.Write(4242, 150, 50, 9999, 256);
  auto st = ReadHostProcessStat(proc.root, 4242, 4096);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->cpu_ticks, 200);
  EXPECT_EQ(st->start_ticks, 9999);
  EXPECT_EQ(st->rss_bytes, 256 * 4096);
  EXPECT_FALSE(ReadHostProcessStat(proc.root, 4243, 4096).has_value()) << "not visible";
}

TEST(HostProcessTest, CpuPercentFromTheDeltaOfTwoReadings) {
  HostProcessStat a{1000, 7, 0}, b{1150, 7, 0};
  // 150 ticks at 100/s = 1.5 s of CPU in 1 s: 150%.
  EXPECT_DOUBLE_EQ(*CpuPercent(&a, b, 1000, 100), 150.0);
  EXPECT_DOUBLE_EQ(*CpuPercent(&a, b, 3000, 100), 50.0);
  EXPECT_FALSE(CpuPercent(nullptr, b, 1000, 100).has_value()) << "no earlier reading";
  HostProcessStat recycled{1150, 8, 0};
  EXPECT_FALSE(CpuPercent(&a, recycled, 1000, 100).has_value()) << "another process with that pid";
  EXPECT_FALSE(CpuPercent(&a, b, 0, 100).has_value());
}

TEST(HostProcessTest, TheModelGivesRowsCpuPercentBetweenFramesAndRss) {
  auto f1 = std::make_shared<Frame>(*testing::MakeFrame(1, testing::Machine()));
  f1->host[4242] = {1000, 7, 512 << 20};
  f1->clock_ticks_per_s = 100;
  auto f2 = std::make_shared<Frame>(*f1);
  f2->sequence = f1->sequence + 1;
  f2->taken_at_unix_ms = f1->taken_at_unix_ms + 2000;
  f2->host[4242] = {1100, 7, 640 << 20};  // 1 s of CPU in 2 s
  TopModel model;
  model.Ingest(f1);
  auto find = [&](uint32_t pid) -> const ProcessRow& {
    for (const auto& r : model.rows()) {
      if (r.pid == pid) return r;
    }
    ADD_FAILURE() << "no row " << pid;
    return model.rows().front();
  };
  EXPECT_FALSE(find(4242).cpu_percent.has_value()) << "one reading is no rate";
  EXPECT_EQ(find(4242).rss_bytes, int64_t{512} << 20);
  model.Ingest(f2);
  ASSERT_TRUE(find(4242).cpu_percent.has_value());
  EXPECT_DOUBLE_EQ(*find(4242).cpu_percent, 50.0);
  EXPECT_EQ(find(4242).rss_bytes, int64_t{640} << 20);
  EXPECT_FALSE(find(5000).rss_bytes.has_value()) << "not read: not visible to us";
}

}  // namespace
}  // namespace gpuman::tui
