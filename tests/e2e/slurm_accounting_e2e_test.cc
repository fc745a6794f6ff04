// Slurm accounting end to end, without Slurm: the daemon (stand-in NVML) tags its history
// samples with the job of a job record written by hand, and `history --slurm-job`,
// `report --slurm-job` and `slurm job-summary` show that job's GPUs (docs/slurm.md
// "Accounting").
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <set>

#include "e2e/e2e_util.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool Eventually(const std::function<bool()>& done, int ms = 30000) {
  for (int waited = 0; waited < ms; waited += 200) {
    if (done()) return true;
    usleep(200000);
  }
  return done();
}

class SlurmAccountingE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_ = dir_.Join("gpuman.sock");
    records_ = dir_.Join("slurm");
    std::ifstream in(kScenarios + "/h100-8.json");
    scenario_json_ = json::parse(in);
    for (auto& g : scenario_json_["gpus"]) {
      g["processes"] = json::array();
      g["utilization"] = {{"gpu", 0}, {"memory", 0}};
    }
    scenario_json_["gpus"][2]["utilization"] = {{"gpu", 70}, {"memory", 10}};
    scenario_json_["gpus"][3]["utilization"] = {{"gpu", 30}, {"memory", 10}};
    scenario_ = dir_.Write("h100-8.json", scenario_json_.dump(2));
    config_ = dir_.Write("config.toml", "[slurm]\nstate_dir = \"" + records_ + "\"\n");
    db_ = dir_.Join("state/history.db");
  }
  void TearDown() override { daemon_.Stop(); }
  std::map<std::string, std::string> Env() {
    auto env = CleanEnv(dir_.Join("leases"));
    env["GPUMAN_SOCKET"] = socket_;
    env["GPUMAN_CONFIG"] = config_;
    env["GPUMAN_KERNEL_LOG"] = dir_.Write("kmsg.txt", "");
    env["GPUMAN_HISTORY_DB"] = db_;
    return env;
  }
  void StartDaemon() {
    ASSERT_TRUE(daemon_.Start({.scenario = scenario_,
                               .socket = socket_,
                               .state_dir = dir_.Join("state"),
                               .env = Env(),
                               .stdout_path = "/dev/null"}));
  }
  testing::RunResult Gpuman(std::vector<std::string> args) { return RunGpuman(dir_.Join("leases"), std::move(args), Env()); }
  // A job record as the prolog writes it, by hand.
  void WriteRecord(const std::string& job, const std::vector<std::string>& gpus, int64_t start,
                   std::optional<int64_t> end) {
    json rec = {{"schema", 1}, {"job_id", job}, {"user", "alice"}, {"uid", 1001}, {"host", "node1"},
                {"gpus", gpus}, {"started_unix_ms", start}};
    rec["ended_unix_ms"] = end ? json(*end) : json(nullptr);
    std::filesystem::create_directories(records_);
    const std::string tmp = records_ + "/." + job + ".tmp";
    std::ofstream(tmp) << rec.dump();
    ASSERT_EQ(std::rename(tmp.c_str(), (records_ + "/" + job + ".json").c_str()), 0);
  }
  std::string Uuid(int i) const { return scenario_json_["gpus"][i]["uuid"]; }

  TempDir dir_;
  json scenario_json_;
  std::string socket_, scenario_, config_, records_, db_;
  PrivateDaemon daemon_;
};

TEST_F(SlurmAccountingE2E, HistoryShowsTheJobsGpus) {
  StartDaemon();
  const int64_t start = NowMs();
  WriteRecord("4242", {Uuid(2), Uuid(3)}, start, std::nullopt);

  json doc;
  ASSERT_TRUE(Eventually([&] {
    auto r = Gpuman({"history", "--slurm-job", "4242", "--json"});
    if (r.exit_code != 0) return false;
    doc = json::parse(r.out, nullptr, false);
    if (!doc.is_object() || doc["slurm_job"]["source"] != "history") return false;
    std::set<std::string> seen;
    for (const auto& s : doc["samples"]) seen.insert(s["gpu_uuid"]);
    return seen.size() == 2;
  })) << doc.dump(2);
  EXPECT_EQ(doc["slurm_job"]["job_id"], "4242");
  EXPECT_EQ(doc["slurm_job"]["user"], "alice");
  EXPECT_EQ(doc["slurm_job"]["gpus"], json::array({Uuid(2), Uuid(3)}));
  for (const auto& s : doc["samples"]) {
    EXPECT_TRUE(s["gpu_uuid"] == Uuid(2) || s["gpu_uuid"] == Uuid(3)) << s.dump();
    EXPECT_EQ(s["slurm_job_id"], "4242");
    EXPECT_EQ(s["slurm_user"], "alice");
    EXPECT_GE(s["t_unix_ms"].get<int64_t>(), start);
  }
  // The other GPUs' samples are untagged.
  auto all = Gpuman({"history", "--json", "--since", "1m"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  bool other = false;
  const json all_doc = json::parse(all.out);
  for (const auto& s : all_doc["samples"]) {
    if (s["gpu_uuid"] == Uuid(5)) {
      other = true;
      EXPECT_TRUE(s["slurm_job_id"].is_null()) << s.dump();
    }
  }
  EXPECT_TRUE(other);

  auto text = Gpuman({"history", "--slurm-job", "4242"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out.rfind("slurm job 4242 of alice: 2 GPU(s)", 0), 0u) << text.out;

  auto report = Gpuman({"report", "--html", "-", "--slurm-job", "4242"});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("slurm job 4242 of alice"), std::string::npos);
  EXPECT_NE(report.out.find(Uuid(2)), std::string::npos);
  EXPECT_EQ(report.out.find(Uuid(5)), std::string::npos);  // not the job's GPU

  auto summary = Gpuman({"slurm", "job-summary", "4242"});
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  ASSERT_EQ(std::count(summary.out.begin(), summary.out.end(), '\n'), 1) << summary.out;
  json line = json::parse(summary.out);
  EXPECT_EQ(line["source"], "history");
  EXPECT_EQ(line["job"], "4242");
  ASSERT_EQ(line["gpus"].size(), 2u);
  EXPECT_EQ(line["gpus"][0]["uuid"], Uuid(2));
  EXPECT_EQ(line["gpus"][0]["util_mean"], 70.0);
  EXPECT_EQ(line["gpus"][1]["util_max"], 30.0);
  EXPECT_GE(line["gpus"][0]["samples"].get<int>(), 1);

  // The job ends: later samples are no longer its.
  const int64_t end = NowMs();
  WriteRecord("4242", {Uuid(2), Uuid(3)}, start, end);
  ASSERT_TRUE(Eventually([&] {
    auto r = Gpuman({"history", "--json", "--since", "10s", "--gpu", Uuid(2)});
    if (r.exit_code != 0) return false;
    json d = json::parse(r.out, nullptr, false);
    return d.is_object() && !d["samples"].empty() && d["samples"].back()["t_unix_ms"].get<int64_t>() > end &&
           d["samples"].back()["slurm_job_id"].is_null();
  }));
  doc = json::parse(Gpuman({"history", "--slurm-job", "4242", "--json"}).out);
  for (const auto& s : doc["samples"]) EXPECT_LE(s["t_unix_ms"].get<int64_t>(), end) << s.dump();
}

TEST_F(SlurmAccountingE2E, UnknownJobsAndBadArguments) {
  StartDaemon();
  ASSERT_TRUE(Eventually([&] { return std::filesystem::exists(db_); }));
  auto unknown = Gpuman({"history", "--slurm-job", "999"});
  EXPECT_EQ(unknown.exit_code, 1) << unknown.out << unknown.err;
  EXPECT_EQ(unknown.err.rfind("gpuman: error: ", 0), 0u) << unknown.err;
  EXPECT_EQ(std::count(unknown.err.begin(), unknown.err.end(), '\n'), 1) << unknown.err;
  auto no_summary = Gpuman({"slurm", "job-summary", "999"});
  EXPECT_EQ(no_summary.exit_code, 1) << no_summary.err;
  EXPECT_EQ(std::count(no_summary.err.begin(), no_summary.err.end(), '\n'), 1) << no_summary.err;
  auto bad_id = Gpuman({"slurm", "job-summary", "../etc"});
  EXPECT_EQ(bad_id.exit_code, 2) << bad_id.err;
  auto word = Gpuman({"slurm", "job-summary", "abc"});  // a safe file name, but no Slurm job id
  EXPECT_EQ(word.exit_code, 2) << word.err;
  EXPECT_EQ(word.err, "gpuman: error: slurm job id 'abc' is not valid (digits, as 1234, 1234_7 or 1234+1)\n");
  auto both = Gpuman({"history", "--slurm-job", "1", "--since", "1h"});
  EXPECT_EQ(both.exit_code, 2) << both.err;

  // A record the daemon never tagged (its GPUs, its time): job-summary and history fall back
  // to it; a bad file beside it changes nothing.
  std::filesystem::create_directories(records_);
  std::ofstream(records_ + "/77.json") << "{broken";
  WriteRecord("76", {Uuid(6)}, NowMs() - 3'600'000, NowMs() - 3'500'000);
  auto old = Gpuman({"slurm", "job-summary", "76"});
  ASSERT_EQ(old.exit_code, 0) << old.err;
  json line = json::parse(old.out);
  EXPECT_EQ(line["source"], "record");
  EXPECT_EQ(line["gpus"], json::parse("[{\"uuid\":\"" + Uuid(6) + "\"}]"));
  auto hist = Gpuman({"history", "--slurm-job", "76", "--json"});
  ASSERT_EQ(hist.exit_code, 0) << hist.err;
  EXPECT_EQ(json::parse(hist.out)["slurm_job"]["source"], "record");
}

}  // namespace
}  // namespace gpuman::e2e
