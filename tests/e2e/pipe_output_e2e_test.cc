// Output that is not a terminal (issue 26): a pipe or a file gets whole lines (status,
// queue, leases), laid out for $COLUMNS or 80; a terminal still gets lines cut to its
// width. Wide characters (CJK, emoji) are padded by display width, so columns stay aligned.
#include <chrono>
#include <thread>

#include "base/utf8.h"
#include "e2e/e2e_util.h"
#include "e2e/tmux.h"

namespace gpuman::e2e {
namespace {

using testing::TempDir;

constexpr std::string_view kEllipsis = "\xE2\x80\xA6";

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The display column where `needle` ends on `line` (-1 when absent).
int EndColumn(const std::string& line, const std::string& needle) {
  const size_t at = line.find(needle);
  if (at == std::string::npos) return -1;
  return TextWidth(std::string_view(line).substr(0, at + needle.size()));
}

TEST(PipeOutputE2E, StatusIsWholeAndWideCharactersKeepColumnsAligned) {
  TempDir dir;
  // h100-8 with dave renamed 王芳 and one of his commands in Chinese with an emoji.
  std::ifstream in(kScenarios + "/h100-8.json");
  nlohmann::json s = nlohmann::json::parse(in);
  s["host_processes"]["73377"]["user"] = "\xE7\x8E\x8B\xE8\x8A\xB3";
  s["host_processes"]["73512"]["command"] =
      "python \xE8\xAF\x84\xE4\xBC\xB0.py \xF0\x9F\x9A\x80 --checkpoint ckpt/step-12000 --notes "
      "\xE4\xB8\xAD\xE6\x96\x87\xE6\xB3\xA8\xE9\x87\x8A";
  const std::string scenario = dir.Write("wide.json", s.dump(2));
  // COLUMNS set explicitly, as an exported shell variable would be: the layout follows it,
  // the lines are still not cut.
  for (const std::string columns : {"", "80"}) {
    auto r = RunGpuman(dir.Join("state"), {"--simulate", scenario, "status"},
                       {{"GPUMAN_LEASE_DIR", dir.Join("leases")}, {"COLUMNS", columns}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find(kEllipsis), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--nproc-per-node 4 pretrain.py --config llama-7b.yaml\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("/home/dave/.local/share/jupyter/runtime/kernel-3.json\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\xE4\xB8\xAD\xE6\x96\x87\xE6\xB3\xA8\xE9\x87\x8A\n"), std::string::npos) << r.out;
    std::string wang, dave, bob;
    for (const std::string& line : Lines(r.out)) {
      if (line.find("73377") != std::string::npos) wang = line;
      if (line.find("73512") != std::string::npos) dave = line;
      if (line.find("51200") != std::string::npos) bob = line;
    }
    ASSERT_FALSE(wang.empty() || dave.empty() || bob.empty()) << r.out;
    EXPECT_TRUE(wang.starts_with("    \xE7\x8E\x8B\xE8\x8A\xB3 ")) << wang;
    // PID, memory and type end in the same columns whoever the user is.
    EXPECT_EQ(EndColumn(wang, "73377"), EndColumn(bob, "51200")) << wang << "\n" << bob;
    EXPECT_EQ(EndColumn(wang, "9.8 GiB  C"), EndColumn(bob, "71.3 GiB  C")) << wang << "\n" << bob;
    EXPECT_EQ(EndColumn(dave, "3 GiB  C"), EndColumn(bob, "71.3 GiB  C")) << dave << "\n" << bob;
  }
}

TEST(PipeOutputE2E, ATerminalStillCutsLinesToItsWidth) {
  if (access(kTmux, X_OK) != 0) GTEST_SKIP() << "tmux is not installed";
  TempDir dir;
  Tmux tmux(dir.Join("state"));
  tmux.Start({kGpuman, "--simulate", "h100-8", "status"}, 80, 40);
  const std::string screen = tmux.WaitForText("source:");
  ASSERT_NE(screen.find("source:"), std::string::npos) << screen;
  // The process lines were cut at the edge: their ends are not on the screen, and no line
  // of the screen wrapped (each row of a process line starts with its indent or a GPU row).
  EXPECT_EQ(screen.find("llama-7b.yaml"), std::string::npos) << screen;
  EXPECT_EQ(screen.find("kernel-3.json"), std::string::npos) << screen;
  EXPECT_NE(screen.find("python -m torch.distributed.run"), std::string::npos) << screen;
}

class PipeOutputDaemonE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_ = dir_.Join("gpuman.sock");
    ASSERT_TRUE(daemon_.Start({.scenario = IdleScenario(dir_, "a100-4"),
                               .socket = socket_,
                               .state_dir = dir_.Join("state"),
                               .env = CleanEnv(dir_.Join("leases")),
                               .stderr_path = dir_.Join("daemon.log")}));
  }
  void TearDown() override {
    Gpuman({"cancel", "--all"});
    daemon_.Stop();
  }
  testing::RunResult Gpuman(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    env["GPUMAN_SOCKET"] = socket_;
    return RunGpuman(dir_.Join("leases"), std::move(args), env);
  }

  TempDir dir_;
  std::string socket_;
  PrivateDaemon daemon_;
};

TEST_F(PipeOutputDaemonE2E, QueueAndLeasesAreWhole) {
  const std::string long_name = "sweep-lr-3e-4-wd-0.1-warmup-2000-" + std::string(40, 'n') + "-end";
  const std::string wide_name = "\xE5\xAE\x9E\xE9\xAA\x8C\xF0\x9F\x9A\x80";  // 实验🚀: 6 columns
  auto blocker = Gpuman({"submit", "-n", "4", "--name", long_name, "--", "sleep", "60"});
  ASSERT_EQ(blocker.exit_code, 0) << blocker.err;
  auto waiting = Gpuman({"submit", "--name", wide_name, "--", "true"});
  ASSERT_EQ(waiting.exit_code, 0) << waiting.err;

  // The waiting job says why once the blocker runs.
  std::string queue;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until) {
    auto r = Gpuman({"queue"}, {{"COLUMNS", "80"}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    queue = r.out;
    if (queue.find("  running ") != std::string::npos && queue.find("waiting for") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const std::vector<std::string> lines = Lines(queue);
  ASSERT_EQ(lines.size(), 3u) << queue;
  EXPECT_EQ(queue.find(kEllipsis), std::string::npos) << queue;
  EXPECT_NE(lines[1].find(long_name + "  running"), std::string::npos) << lines[1];
  EXPECT_GT(TextWidth(lines[2]), 80) << "the reason is written whole: " << lines[2];
  EXPECT_NE(lines[2].find("waiting for 1 GPU; 0 free; next to start"), std::string::npos) << lines[2];
  // NAME and WHY / WHEN start in the same display columns on every line.
  const auto column_of = [](const std::string& line, size_t byte) { return TextWidth(line.substr(0, byte)); };
  const int name_at = column_of(lines[0], lines[0].find("NAME"));
  const int why_at = column_of(lines[0], lines[0].find("WHY / WHEN"));
  EXPECT_EQ(column_of(lines[1], lines[1].find(long_name)), name_at) << queue;
  EXPECT_EQ(column_of(lines[2], lines[2].find(wide_name)), name_at) << queue;
  EXPECT_EQ(column_of(lines[1], lines[1].rfind("running")), why_at) << queue;
  const size_t reason = lines[2].find_first_not_of(' ', lines[2].find(wide_name) + wide_name.size());
  EXPECT_EQ(column_of(lines[2], reason), why_at) << queue;

  auto leases = Gpuman({"leases"});
  ASSERT_EQ(leases.exit_code, 0) << leases.err;
  EXPECT_NE(leases.out.find("job 1 (" + long_name + ")\n"), std::string::npos) << leases.out;
  EXPECT_EQ(leases.out.find(kEllipsis), std::string::npos) << leases.out;
}

}  // namespace
}  // namespace gpuman::e2e
