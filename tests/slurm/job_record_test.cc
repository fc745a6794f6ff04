// The Slurm job record file (src/slurm/job_record.cc): round trip, atomic replacement,
// bad files skipped and reported, the state-dir rule, and which job holds a GPU when.
#include "slurm/job_record.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace gpuman::slurm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

SlurmJobRecord Rec(const std::string& id, std::vector<std::string> gpus, int64_t start,
                   std::optional<int64_t> end = std::nullopt) {
  SlurmJobRecord r;
  r.job_id = id;
  r.user = "alice";
  r.uid = 1001;
  r.host = "node1";
  r.gpu_uuids = std::move(gpus);
  r.started_unix_ms = start;
  r.ended_unix_ms = end;
  return r;
}

TEST(JobRecordTest, WriteThenReadRoundTrips) {
  testing::TempDir dir;
  const std::string d = dir.Join("slurm");  // created by the write
  auto rec = Rec("123", {"GPU-aaaa", "GPU-bbbb"}, 1000);
  ASSERT_TRUE(WriteJobRecord(d, rec)) << "write";
  auto back = ReadJobRecord(d, "123");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, rec);
  struct stat st {};
  ASSERT_EQ(stat(JobRecordPath(d, "123").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  ASSERT_EQ(stat(d.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);

  rec.ended_unix_ms = 5000;  // the epilog completes it: replaced whole
  ASSERT_TRUE(WriteJobRecord(d, rec));
  back = ReadJobRecord(d, "123");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->ended_unix_ms, std::optional<int64_t>(5000));
  // No temp file left behind.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(d)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1);
}

TEST(JobRecordTest, JsonHasTheDocumentedFields) {
  const std::string text = JobRecordToJson(Rec("7", {"GPU-x"}, 42));
  EXPECT_EQ(text,
            R"({"ended_unix_ms":null,"gpus":["GPU-x"],"host":"node1","job_id":"7","schema":1,)"
            R"("started_unix_ms":42,"uid":1001,"user":"alice"})");
}

TEST(JobRecordTest, MissingRecordIsNotFound) {
  testing::TempDir dir;
  auto r = ReadJobRecord(dir.path(), "9");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
}

TEST(JobRecordTest, InvalidJobIdsAreRefusedBeforeAnyFileIsTouched) {
  testing::TempDir dir;
  for (std::string id : std::vector<std::string>{"", "../x", ".hidden", "a/b", "1 2", std::string(65, '1')}) {
    EXPECT_FALSE(IsValidJobId(id)) << id;
    auto w = WriteJobRecord(dir.path(), Rec(id, {}, 0));
    ASSERT_FALSE(w) << id;
    EXPECT_EQ(w.error().code, ErrorCode::kInvalidArgument);
    EXPECT_FALSE(ReadJobRecord(dir.path(), id));
  }
  for (std::string id : {"1", "123_4", "77+1", "job.1"}) EXPECT_TRUE(IsValidJobId(id)) << id;
  EXPECT_FALSE(WriteJobRecord(dir.path(), Rec("1", {"not-a-uuid"}, 0)));
}

TEST(JobRecordTest, ListSkipsAndReportsBadFiles) {
  testing::TempDir dir;
  ASSERT_TRUE(WriteJobRecord(dir.path(), Rec("10", {"GPU-a"}, 1)));
  ASSERT_TRUE(WriteJobRecord(dir.path(), Rec("9", {"GPU-b"}, 2)));
  dir.Write("11.json", "{\"schema\":1, \"job_id\":\"11\"");              // cut short
  dir.Write("12.json", "[1,2]");                                         // not an object
  dir.Write("13.json", JobRecordToJson(Rec("99", {"GPU-c"}, 3)));        // names another job
  dir.Write("14.json", R"({"schema":2,"job_id":"14"})");                 // newer schema
  dir.Write("15.json", std::string(kMaxJobRecordBytes + 1, ' '));        // too large
  dir.Write("bad name.json", JobRecordToJson(Rec("1", {}, 0)));
  dir.Write(".10.json.77.tmp", "partial");                              // a writer's temp file
  dir.Write("notes.txt", "hello");
  std::vector<std::string> problems;
  auto list = ListJobRecords(dir.path(), &problems);
  ASSERT_TRUE(list) << list.error().message;
  ASSERT_THAT(*list, SizeIs(2));
  EXPECT_EQ((*list)[0].job_id, "9");  // numeric order
  EXPECT_EQ((*list)[1].job_id, "10");
  ASSERT_THAT(problems, SizeIs(6));
  EXPECT_THAT(problems[0], HasSubstr("11.json: not JSON"));
  EXPECT_THAT(problems[1], HasSubstr("12.json: not a JSON object"));
  EXPECT_THAT(problems[2], HasSubstr("13.json: holds job 99, not 13"));
  EXPECT_THAT(problems[3], HasSubstr("14.json: schema 2"));
  EXPECT_THAT(problems[4], HasSubstr("15.json: larger than"));
  EXPECT_THAT(problems[5], HasSubstr("bad name.json: not named"));
  // Without a problems list it still succeeds.
  EXPECT_THAT(*ListJobRecords(dir.path()), SizeIs(2));
}

TEST(JobRecordTest, MissingDirIsAnEmptyList) {
  testing::TempDir dir;
  auto list = ListJobRecords(dir.Join("nope"));
  ASSERT_TRUE(list);
  EXPECT_THAT(*list, IsEmpty());
}

TEST(JobRecordTest, StateDirRule) {
  EXPECT_EQ(SlurmStateDir(std::string("/etc/x"), "/env"), "/etc/x");
  EXPECT_EQ(SlurmStateDir(std::string(""), "/env"), "/env");
  EXPECT_EQ(SlurmStateDir(std::nullopt, "/env"), "/env");
  EXPECT_EQ(SlurmStateDir(std::nullopt, ""), "/run/gpuman/slurm");
  EXPECT_EQ(SlurmStateDir(std::nullopt, nullptr), "/run/gpuman/slurm");
}

TEST(JobRecordTest, JobHoldingGpuFollowsTheTimeWindow) {
  std::vector<SlurmJobRecord> recs = {Rec("1", {"GPU-a"}, 100, 200), Rec("2", {"GPU-a", "GPU-b"}, 300),
                                      Rec("3", {"GPU-b"}, 50, 60)};
  EXPECT_EQ(JobHoldingGpu(recs, "GPU-a", 99), nullptr);
  EXPECT_EQ(JobHoldingGpu(recs, "GPU-a", 100)->job_id, "1");
  EXPECT_EQ(JobHoldingGpu(recs, "GPU-a", 200)->job_id, "1");
  EXPECT_EQ(JobHoldingGpu(recs, "GPU-a", 250), nullptr);
  EXPECT_EQ(JobHoldingGpu(recs, "GPU-a", 1000)->job_id, "2");  // running: no end
  EXPECT_EQ(JobHoldingGpu(recs, "GPU-b", 55)->job_id, "3");
  EXPECT_EQ(JobHoldingGpu(recs, "GPU-c", 55), nullptr);
  // A stale record left open by a crashed epilog: the newer job wins.
  recs.push_back(Rec("4", {"GPU-b"}, 400));
  EXPECT_EQ(JobHoldingGpu(recs, "GPU-b", 500)->job_id, "4");
}

TEST(JobRecordTest, FromJsonChecksTypes) {
  auto ok = JobRecordFromJson(JobRecordToJson(Rec("5", {"MIG-x"}, 1, 2)));
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->ended_unix_ms, std::optional<int64_t>(2));
  EXPECT_FALSE(JobRecordFromJson(R"({"schema":1,"job_id":"5","user":"a","host":"h","uid":-1,"gpus":[],"started_unix_ms":1})"));
  EXPECT_FALSE(JobRecordFromJson(R"({"schema":1,"job_id":"5","user":"a","host":"h","uid":1,"gpus":[3],"started_unix_ms":1})"));
  EXPECT_FALSE(JobRecordFromJson(R"({"schema":1,"job_id":"5","user":"a","host":"h","uid":1,"gpus":[],"started_unix_ms":"x"})"));
  EXPECT_TRUE(JobRecordFromJson(R"({"schema":1,"job_id":"5","user":"a","host":"h","uid":1,"gpus":[],"started_unix_ms":1})"));
}

}  // namespace
}  // namespace gpuman::slurm
