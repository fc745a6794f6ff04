// Lease acquire+release throughput: 8 client processes (fork), each with its own
// LeaseStore on one state db in a temp dir, acquire one of 8 GPUs and release it again
// in a loop. One op = one Acquire plus one Release (two write transactions).
// Goal: >= 2,000 ops/s in total. Usage: lease_bench [iterations per process] [processes]
// Built as build/bench/lease_bench.
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "store/lease_store.h"
#include "store/proc_liveness.h"

namespace {

using gpuman::Result;
using gpuman::store::LeaseStore;

constexpr int kGpus = 8;
constexpr double kGoalOpsPerSecond = 2000;

int Client(const std::string& path, int iterations) {
  auto store = LeaseStore::Open(path);
  if (!store) {
    std::fprintf(stderr, "lease_bench: %s\n", store.error().message.c_str());
    return 2;
  }
  auto me = gpuman::store::CurrentLeaseProcess(getpid());
  if (!me) return 3;
  gpuman::model::Lease draft;
  draft.uid = getuid();
  draft.user = "bench";
  draft.command = "lease_bench";
  draft.kind = "run";
  draft.processes = {*me};
  auto alive = gpuman::store::ProcLivenessCheck();
  auto choose = [](const std::vector<gpuman::model::Lease>& live)
      -> Result<std::vector<std::string>> {
    bool taken[kGpus] = {};
    for (const auto& lease : live) {
      for (const auto& uuid : lease.gpu_uuids) taken[std::atoi(uuid.c_str() + 4)] = true;
    }
    for (int g = 0; g < kGpus; ++g) {
      if (!taken[g]) return std::vector<std::string>{"GPU-" + std::to_string(g)};
    }
    return gpuman::MakeError(gpuman::ErrorCode::kUnavailable, "all GPUs leased");
  };
  for (int i = 0; i < iterations; ++i) {
    auto lease = (*store)->Acquire(draft, choose, alive);
    if (!lease) {
      std::fprintf(stderr, "lease_bench: %s\n", lease.error().message.c_str());
      return 4;
    }
    if (auto s = (*store)->Release(lease->id); !s) {
      std::fprintf(stderr, "lease_bench: %s\n", s.error().message.c_str());
      return 5;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int iterations = argc > 1 ? std::atoi(argv[1]) : 1000;
    const int processes = argc > 2 ? std::atoi(argv[2]) : 8;
    std::string pattern =
        (std::filesystem::temp_directory_path() / "gpuman-lease-bench-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("lease_bench: mkdtemp");
      return 1;
    }
    const std::string path = pattern + "/leases.db";
    {
      auto store = LeaseStore::Open(path);  // create and migrate before the clock starts
      if (!store) {
        std::fprintf(stderr, "lease_bench: %s\n", store.error().message.c_str());
        return 1;
      }
    }

    auto start = std::chrono::steady_clock::now();
    std::vector<pid_t> children;
    for (int p = 0; p < processes; ++p) {
      pid_t pid = fork();
      if (pid < 0) {
        std::perror("lease_bench: fork");
        return 1;
      }
      if (pid == 0) _exit(Client(path, iterations));
      children.push_back(pid);
    }
    int failed = 0;
    for (pid_t pid : children) {
      int status = 0;
      waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::filesystem::remove_all(pattern);

    long ops = static_cast<long>(iterations) * processes;
    double rate = ops / seconds;
    std::printf("processes:  %d\n", processes);
    std::printf("total ops:  %ld (acquire + release each)\n", ops);
    std::printf("seconds:    %.3f\n", seconds);
    std::printf("ops/s:      %.0f\n", rate);
    std::printf("goal:       >= %.0f ops/s: %s\n", kGoalOpsPerSecond,
                rate >= kGoalOpsPerSecond ? "met" : "NOT met");
    if (failed > 0) {
      std::fprintf(stderr, "lease_bench: %d client(s) failed\n", failed);
      return 1;
    }
    return rate >= kGoalOpsPerSecond ? 0 : 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lease_bench: %s\n", e.what());
    return 1;
  }
}
