// End-to-end: `gpuman explain` warns when a GPU it would expose is leased to another user
// or runs another user's process, never about the caller's own lease, and turns an
// unreadable lease table into one note (docs/visibility.md). The lease case needs root:
// a throwaway user takes the lease in a shared machine lease table (GPUMAN_LEASE_DIR).
#include <sys/stat.h>

#include <fstream>
#include <regex>
#include <thread>

#include "e2e/user_env.h"
#include "e2e/users.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

std::vector<json> WarningsWithCode(const json& doc, const std::string& code) {
  std::vector<json> out;
  for (const auto& w : doc["warnings"]) {
    if (w["code"] == code) out.push_back(w);
  }
  return out;
}

class ExplainOthersE2E : public ::testing::Test {
 protected:
  // No GPUMAN_SOCKET: a named socket that does not answer is an error (the daemon is
  // expected); without one, no daemon means the machine lease table.
  testing::RunResult Gpuman(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    return RunGpuman(state_.path(), std::move(args), env);
  }
  TempDir state_;
};

// a100-4: GPU 1 runs two processes of alice (uid 1001, from the scenario's host_processes).
TEST_F(ExplainOthersE2E, AnotherUsersProcessOnAVisibleGpu) {
  if (getuid() == 1001) GTEST_SKIP() << "we are the scenario's alice";
  auto r = Gpuman({"--simulate", "a100-4", "explain", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  auto used = WarningsWithCode(doc, "used_by_other_user");
  ASSERT_EQ(used.size(), 1u) << doc.dump(2);
  const std::string message = used[0]["message"];
  EXPECT_EQ(message.rfind("GPU 1 (GPU-", 0), 0u) << message;
  EXPECT_NE(message.find("runs 2 processes of alice (uid 1001) (pid 4242 python train.py"), std::string::npos) << message;
  EXPECT_NE(message.find("your process would share it as cuda:1"), std::string::npos) << message;
  EXPECT_EQ(doc["visible"][1]["used_by_uids"], json::array({1001}));
  EXPECT_EQ(doc["visible"][0]["used_by_uids"], json::array());
  EXPECT_EQ(doc["notes"], json::array()) << "the lease table was readable";

  // Not exposed, not warned about.
  auto elsewhere = Gpuman({"--simulate", "a100-4", "explain", "--json", "--env", "CUDA_VISIBLE_DEVICES=0,2,3"});
  ASSERT_EQ(elsewhere.exit_code, 0) << elsewhere.err;
  EXPECT_TRUE(WarningsWithCode(json::parse(elsewhere.out), "used_by_other_user").empty()) << elsewhere.out;

  auto text = Gpuman({"--simulate", "a100-4", "explain"});
  EXPECT_NE(text.out.find("! used_by_other_user: GPU 1 (GPU-"), std::string::npos) << text.out;
}

TEST_F(ExplainOthersE2E, AnUnreadableLeaseTableIsOneNote) {
  const std::string not_a_dir = state_.Write("file", "not a directory");
  auto r = RunGpuman(state_.path(), {"--simulate", "a100-4", "explain", "--json"},
                     {{"GPUMAN_LEASE_DIR", not_a_dir}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  json doc = json::parse(r.out);
  ASSERT_EQ(doc["notes"].size(), 1u) << doc.dump(2);
  const std::string note = doc["notes"][0];
  EXPECT_EQ(note.rfind("leases not checked (", 0), 0u) << note;
  EXPECT_NE(note.find("): a GPU leased to another user is not warned about"), std::string::npos) << note;
  EXPECT_EQ(doc["visible"].size(), 4u) << "everything else is still explained";
  auto text = RunGpuman(state_.path(), {"--simulate", "a100-4", "explain"},
                        {{"GPUMAN_LEASE_DIR", not_a_dir}});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("\nNotes:\n  - leases not checked ("), std::string::npos) << text.out;
}

TEST_F(ExplainOthersE2E, AnotherUsersLeaseIsWarnedTheOwnersIsNot) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to create a user";
  auto bob = EnsureTestUser("gpumanvic");
  if (!bob) GTEST_SKIP() << "useradd is not available";
  // A shared machine lease table, as /run/gpuman/leases: root's 0755 directory, set up by
  // a first root command.
  TempDir shared;
  chmod(shared.path().c_str(), 0755);
  const std::map<std::string, std::string> root_env = {{"GPUMAN_LEASE_DIR", shared.path()}};
  auto setup = RunGpuman(state_.path(), {"--simulate", "a100-4", "leases"}, root_env);
  ASSERT_EQ(setup.exit_code, 0) << setup.err;
  TempDir home;
  chmod(home.path().c_str(), 0777);
  auto env = UserEnv(*bob, home.path(), home.Join("state"));
  env["GPUMAN_LEASE_DIR"] = shared.path();
  auto probe = RunAsUser(*bob, {kGpuman, "--version"}, env);
  if (probe.exit_code != 0) GTEST_SKIP() << "the test user cannot run " << kGpuman << ": " << probe.err;

  // Bob's lease lives as long as its holder, gpuman's parent: a shell of bob's that waits
  // for `gate` (select --lease refuses a parent that is not the caller's own).
  const std::string out = home.Join("select.out"), gate = home.Join("gate");
  std::thread holder([&] {
    RunAsUser(*bob,
              {"/bin/sh", "-c",
               "\"$0\" --simulate a100-4 select --lease -n 1 --format env > \"$1\" 2>&1; "
               "while [ ! -e \"$2\" ]; do sleep 0.05; done",
               kGpuman, out, gate},
              env);
  });
  struct Gate {
    std::string path;
    std::thread& t;
    ~Gate() {
      std::ofstream(path).put('\n');
      t.join();
    }
  } opened{gate, holder};
  std::string sel_out;
  for (int i = 0; i < 600 && sel_out.find("GPUMAN_LEASE_ID=") == std::string::npos; ++i) {
    usleep(50 * 1000);
    sel_out = Slurp(out);
  }
  std::smatch m;
  ASSERT_TRUE(std::regex_search(sel_out, m, std::regex("CUDA_VISIBLE_DEVICES=(GPU-[0-9a-f-]+)"))) << sel_out;
  const std::string uuid = m[1];
  ASSERT_TRUE(std::regex_search(sel_out, m, std::regex("GPUMAN_LEASE_ID=([0-9]+)"))) << sel_out;
  const std::string lease_id = m[1];

  // Bob, in the shell that holds it (GPUMAN_LEASE_ID and CUDA_VISIBLE_DEVICES exported):
  // his own lease is nothing to warn about.
  auto own_env = env;
  own_env["CUDA_VISIBLE_DEVICES"] = uuid;
  own_env["GPUMAN_LEASE_ID"] = lease_id;
  auto own = RunAsUser(*bob, {kGpuman, "--simulate", "a100-4", "explain", "--json"}, own_env);
  ASSERT_EQ(own.exit_code, 0) << own.err;
  json own_doc = json::parse(own.out);
  ASSERT_EQ(own_doc["visible"].size(), 1u) << own.out;
  EXPECT_TRUE(WarningsWithCode(own_doc, "leased_to_other").empty()) << own.out;
  EXPECT_EQ(own_doc["visible"][0]["leased_to_uids"], json::array());
  EXPECT_EQ(own_doc["notes"], json::array()) << own.out;

  // Root, on the same machine lease table: bob's lease on that GPU is.
  auto root = RunGpuman(state_.path(), {"--simulate", "a100-4", "explain", "--json", "--env",
                                        "CUDA_VISIBLE_DEVICES=" + uuid},
                        root_env);
  ASSERT_EQ(root.exit_code, 0) << root.err;
  json doc = json::parse(root.out);
  auto leased = WarningsWithCode(doc, "leased_to_other");
  ASSERT_EQ(leased.size(), 1u) << doc.dump(2);
  const std::string message = leased[0]["message"];
  EXPECT_NE(message.find(") is leased to gpumanvic (uid " + std::to_string(bob->pw_uid) + ", lease " + lease_id +
                         " for gpuman select --lease): your process would share it as cuda:0"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.rfind("GPU " + std::to_string(doc["visible"][0]["index"].get<int>()) + " (" + uuid.substr(0, 12), 0),
            0u)
      << message;
  EXPECT_EQ(doc["visible"][0]["leased_to_uids"], json::array({bob->pw_uid}));

  auto rel = RunAsUser(*bob, {kGpuman, "--simulate", "a100-4", "release", lease_id}, env);
  EXPECT_EQ(rel.exit_code, 0) << rel.err;
  auto after = RunGpuman(state_.path(), {"--simulate", "a100-4", "explain", "--json", "--env",
                                         "CUDA_VISIBLE_DEVICES=" + uuid},
                         root_env);
  EXPECT_TRUE(WarningsWithCode(json::parse(after.out), "leased_to_other").empty()) << after.out;
}

}  // namespace
}  // namespace gpuman::e2e
