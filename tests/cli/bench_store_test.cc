// Where `gpuman bench` stores its figures and what `--prefer fastest` reads back
// (cli/bench_store.h; docs/selection.md, "Measured figures").
#include "cli/bench_store.h"

#include <sys/stat.h>

#include <fstream>

#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace gpuman::cli {
namespace {

Environment Env(std::map<std::string, std::string> vars) { return Environment{std::move(vars)}; }

TEST(BenchStoreTest, RootWritesTheMachinesFileAUserOnlyTheirOwn) {
  auto root = BenchFilePaths(Env({{"HOME", "/root"}}), 0);
  EXPECT_EQ(root.write, "/var/lib/gpuman/bench.json");
  EXPECT_EQ(root.read, std::vector<std::string>{"/var/lib/gpuman/bench.json"});

  auto user = BenchFilePaths(Env({{"HOME", "/home/ann"}}), 1000);
  EXPECT_EQ(user.write, "/home/ann/.cache/gpuman/bench.json");
  EXPECT_EQ(user.read, (std::vector<std::string>{"/var/lib/gpuman/bench.json", "/home/ann/.cache/gpuman/bench.json"}));
  auto xdg = BenchFilePaths(Env({{"HOME", "/home/ann"}, {"XDG_CACHE_HOME", "/tmp/c"}}), 1000);
  EXPECT_EQ(xdg.write, "/tmp/c/gpuman/bench.json");

  auto named = BenchFilePaths(Env({{"HOME", "/home/ann"}, {"GPUMAN_BENCH_FILE", "/tmp/b.json"}}), 1000);
  EXPECT_EQ(named.write, "/tmp/b.json");
  EXPECT_EQ(named.read, std::vector<std::string>{"/tmp/b.json"});
}

TEST(BenchStoreTest, WrittenRecordsReadBackAndTheNewestMeasurementWins) {
  testing::TempDir dir;
  const std::string machine = dir.Join("machine/bench.json"), mine = dir.Join("mine/bench.json");
  BenchRecord old_a{"GPU-a", "A", 10, 100, 1000, "550.1", "12.4"};
  BenchRecord b{"GPU-b", "B", 30, 300, 1000, "550.1", "12.4"};
  ASSERT_TRUE(WriteBenchFile(machine, {{"GPU-a", old_a}, {"GPU-b", b}}));
  BenchRecord new_a{"GPU-a", "A", 25, 100, 2000, "550.1", "12.4"};
  ASSERT_TRUE(WriteBenchFile(mine, {{"GPU-a", new_a}}));
  struct stat st {};
  ASSERT_EQ(stat(machine.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);

  auto back = ReadBenchFile(machine);
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ(back->at("GPU-b").memory_gbps, 300);
  EXPECT_EQ(back->at("GPU-b").driver_version, "550.1");

  std::vector<std::string> warnings;
  auto measured = MeasuredFp32(BenchPaths{"", {machine, mine, dir.Join("absent.json")}}, warnings);
  EXPECT_EQ(measured, (std::map<std::string, double>{{"GPU-a", 25}, {"GPU-b", 30}}));
  EXPECT_TRUE(warnings.empty());

  std::ofstream(mine) << "not json";
  measured = MeasuredFp32(BenchPaths{"", {machine, mine}}, warnings);
  EXPECT_EQ(measured.at("GPU-a"), 10);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("bench file " + mine + ": not gpuman's format"), std::string::npos) << warnings[0];
}

}  // namespace
}  // namespace gpuman::cli
