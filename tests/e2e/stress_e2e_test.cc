// Stress: 200 concurrent `gpuman run --wait` launches on the 8-GPU scenario (most -n 1,
// some -n 2). Each job records when it started and ended and which GPUs it was given;
// the checker asserts that no GPU was ever held by two jobs at once and that every
// launch finished successfully.
#include <sys/wait.h>
#include <unistd.h>

#include <map>

#include "e2e/e2e_util.h"

namespace gpuman::e2e {
namespace {

using testing::TempDir;

struct Interval {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int launch = 0;
};

TEST(StressE2E, TwoHundredConcurrentRunsNeverShareAGpu) {
  constexpr int kLaunches = 200;
  TempDir state, work;
  const std::string scenario = IdleScenario(work, "h100-8");
  auto env = CleanEnv(state.path());

  // The job: note start time and GPUs, hold them briefly, note the end time.
  const std::string job =
      "s=$(date +%s%N); sleep 0.05; e=$(date +%s%N); echo \"$s $e $CUDA_VISIBLE_DEVICES\" > \"$1\"";
  std::vector<pid_t> pids;
  for (int i = 0; i < kLaunches; ++i) {
    std::string count = (i % 5 == 0) ? "2" : "1";
    std::string record = work.Join("job-" + std::to_string(i));
    pid_t pid = fork();
    if (pid == 0) {
      for (const auto& [k, v] : env) {
        if (v.empty()) unsetenv(k.c_str());
        else setenv(k.c_str(), v.c_str(), 1);
      }
      execl(kGpuman.c_str(), kGpuman.c_str(), "--simulate", scenario.c_str(), "run", "-q", "-n", count.c_str(),
            "--wait", "240s", "--", "sh", "-c", job.c_str(), "sh", record.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    pids.push_back(pid);
  }
  int failures = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
  }
  EXPECT_EQ(failures, 0) << "every launch must finish successfully";

  std::map<std::string, std::vector<Interval>> by_gpu;
  int recorded = 0;
  for (int i = 0; i < kLaunches; ++i) {
    std::istringstream in(Slurp(work.Join("job-" + std::to_string(i))));
    Interval iv;
    std::string gpus;
    if (!(in >> iv.start_ns >> iv.end_ns >> gpus)) continue;
    ++recorded;
    iv.launch = i;
    size_t expected = (i % 5 == 0) ? 2 : 1;
    size_t commas = static_cast<size_t>(std::count(gpus.begin(), gpus.end(), ','));
    EXPECT_EQ(commas + 1, expected) << "launch " << i << " got " << gpus;
    std::stringstream list(gpus);
    for (std::string uuid; std::getline(list, uuid, ',');) by_gpu[uuid].push_back(iv);
  }
  EXPECT_EQ(recorded, kLaunches);
  EXPECT_LE(by_gpu.size(), 8u);
  int overlaps = 0;
  for (auto& [uuid, intervals] : by_gpu) {
    std::sort(intervals.begin(), intervals.end(),
              [](const Interval& a, const Interval& b) { return a.start_ns < b.start_ns; });
    for (size_t k = 1; k < intervals.size(); ++k) {
      if (intervals[k].start_ns < intervals[k - 1].end_ns) {
        ++overlaps;
        ADD_FAILURE() << uuid << " held by launch " << intervals[k - 1].launch << " and " << intervals[k].launch
                      << " at once";
      }
    }
  }
  EXPECT_EQ(overlaps, 0);
  // Nothing left behind.
  auto leases = RunGpuman(state.path(), {"--simulate", scenario, "leases", "--json"});
  EXPECT_EQ(nlohmann::json::parse(leases.out)["leases"].size(), 0u);
}

}  // namespace
}  // namespace gpuman::e2e
