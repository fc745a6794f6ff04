// The AdminComment summary (src/cli/slurm_accounting.cc): from history, from the record
// alone, and its size bound.
#include "cli/slurm_accounting.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "support/temp_dir.h"

namespace gpuman::cli {
namespace {

using nlohmann::json;

slurm::SlurmJobRecord Rec(std::vector<std::string> gpus) {
  slurm::SlurmJobRecord r;
  r.job_id = "123";
  r.user = "alice";
  r.uid = 1001;
  r.host = "node1";
  r.gpu_uuids = std::move(gpus);
  r.started_unix_ms = 10'000;
  r.ended_unix_ms = 70'000;
  return r;
}

model::GpuSample Sample(int64_t t, const std::string& uuid, double util, int64_t mem_mib) {
  model::GpuSample s;
  s.t_unix_ms = t;
  s.gpu_uuid = uuid;
  s.utilization_percent = util;
  s.memory_used_bytes = mem_mib * 1024 * 1024;
  return s;
}

TEST(SlurmAdminCommentTest, FromHistoryCountsOnlyTheJobsGpusAndWindow) {
  std::vector<model::GpuSample> samples = {
      Sample(5'000, "GPU-a", 100, 9000),   // before the job: ignored
      Sample(10'000, "GPU-a", 20, 100),    Sample(20'000, "GPU-a", 40, 300), Sample(20'000, "GPU-b", 90, 50),
      Sample(20'000, "GPU-zzz", 100, 1),   // not the job's GPU
      Sample(80'000, "GPU-b", 100, 9000),  // after the job
  };
  const std::string line = SlurmAdminComment(Rec({"GPU-a", "GPU-b"}), samples, 999'999);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  json j = json::parse(line);
  EXPECT_EQ(j["job"], "123");
  EXPECT_EQ(j["user"], "alice");
  EXPECT_EQ(j["host"], "node1");
  EXPECT_EQ(j["duration_s"], 60);
  EXPECT_EQ(j["source"], "history");
  ASSERT_EQ(j["gpus"].size(), 2u);
  EXPECT_EQ(j["gpus"][0]["uuid"], "GPU-a");
  EXPECT_EQ(j["gpus"][0]["util_mean"], 30.0);
  EXPECT_EQ(j["gpus"][0]["util_max"], 40.0);
  EXPECT_EQ(j["gpus"][0]["mem_max_mib"], 300);
  EXPECT_EQ(j["gpus"][0]["samples"], 2);
  EXPECT_EQ(j["gpus"][1]["samples"], 1);
  EXPECT_EQ(j["gpus"][1]["mem_max_mib"], 50);
}

TEST(SlurmAdminCommentTest, RecordOnlyWithoutHistory) {
  auto rec = Rec({"GPU-a"});
  rec.ended_unix_ms.reset();  // still running: duration up to now
  json j = json::parse(SlurmAdminComment(rec, {}, 40'000));
  EXPECT_EQ(j["source"], "record");
  EXPECT_EQ(j["duration_s"], 30);
  EXPECT_EQ(j["ended"], false);
  EXPECT_EQ(j["gpus"], json::parse(R"([{"uuid":"GPU-a"}])"));
}

TEST(SlurmAdminCommentTest, StaysWithinTheSizeBound) {
  std::vector<std::string> gpus;
  std::vector<model::GpuSample> samples;
  for (int i = 0; i < 64; ++i) {
    gpus.push_back("GPU-" + std::string(36, static_cast<char>('a' + i % 26)) + std::to_string(i));
    samples.push_back(Sample(20'000, gpus.back(), 50, 10));
  }
  const std::string line = SlurmAdminComment(Rec(gpus), samples, 0);
  EXPECT_LE(line.size(), kAdminCommentMaxBytes);
  json j = json::parse(line);
  EXPECT_GT(j["gpus"].size(), 0u);
  EXPECT_EQ(j["gpus"].size() + j["gpus_omitted"].get<size_t>(), 64u);

  auto huge = Rec({"GPU-a"});
  huge.user = std::string(5000, 'u');
  const std::string minimal = SlurmAdminComment(huge, {}, 0);
  EXPECT_LE(minimal.size(), kAdminCommentMaxBytes);
  EXPECT_EQ(json::parse(minimal)["job"], "123");
}


// A missing record is nothing to say; one that cannot be read is one warning line, and
// the caller goes on without it (the history may still know the job).
TEST(ReadJobRecordOrWarnTest, MissingIsQuietBrokenIsOneWarningReadableIsTheRecord) {
  testing::TempDir dir;
  std::ostringstream out, err;
  Context ctx(Environment{}, Config{}, std::nullopt, out, err);
  EXPECT_FALSE(ReadJobRecordOrWarn(dir.path(), "123", ctx));
  EXPECT_EQ(err.str(), "");
  ASSERT_TRUE(slurm::WriteJobRecord(dir.path(), Rec({"GPU-a"})));
  auto rec = ReadJobRecordOrWarn(dir.path(), "123", ctx);
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->user, "alice");
  EXPECT_EQ(err.str(), "");
  std::ofstream(slurm::JobRecordPath(dir.path(), "123"), std::ios::trunc) << "{ not json";
  EXPECT_FALSE(ReadJobRecordOrWarn(dir.path(), "123", ctx));
  const std::string said = err.str();
  EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 1) << said;
  EXPECT_EQ(said.rfind("gpuman: warning: ", 0), 0u) << said;
}

}  // namespace
}  // namespace gpuman::cli
