#include "cli/socket_trust.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "cli/daemon_client.h"
#include "cli/exit_codes.h"
#include "support/temp_dir.h"

namespace gpuman::cli {
namespace {

using gpuman::testing::TempDir;

constexpr uint32_t kMe = 1001;
constexpr uint32_t kMallory = 1002;
const std::string kPath = "/tmp/gpuman-1001/gpuman.sock";
const std::string kDir = "/tmp/gpuman-1001";

std::string Names(uint32_t uid) {
  if (uid == 0) return "root";
  if (uid == kMe) return "victim";
  if (uid == kMallory) return "mallory";
  return "";
}

FileFacts Dir(uint32_t uid, uint32_t perm) { return FileFacts{uid, S_IFDIR | perm}; }
FileFacts Sock(uint32_t uid, uint32_t perm = 0600) { return FileFacts{uid, S_IFSOCK | perm}; }

Status Judge(const FileFacts& dir, const FileFacts& sock, uint32_t me = kMe) {
  return JudgeSocketTrust(kPath, kDir, dir, sock, me, Names);
}

TEST(JudgeSocketTrustTest, OwnDirectoryAndSocketAreTrusted) {
  EXPECT_TRUE(Judge(Dir(kMe, 0700), Sock(kMe)).has_value());
  EXPECT_TRUE(Judge(Dir(kMe, 0755), Sock(kMe, 0666)).has_value());
}

TEST(JudgeSocketTrustTest, RootDirectoryAndSocketAreTrusted) {
  EXPECT_TRUE(Judge(Dir(0, 0755), Sock(0, 0666)).has_value()) << "the system daemon's /run/gpuman";
  EXPECT_TRUE(Judge(Dir(0, 0755), Sock(kMe)).has_value());
  EXPECT_TRUE(Judge(Dir(kMe, 0700), Sock(0)).has_value());
}

TEST(JudgeSocketTrustTest, AnotherUsersDirectoryIsRefusedByName) {
  auto r = Judge(Dir(kMallory, 0700), Sock(kMe));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(r.error().message,
            "refusing the daemon socket /tmp/gpuman-1001/gpuman.sock: its directory belongs to mallory (uid 1002), "
            "not to you or root");
  EXPECT_EQ(ExitCodeFor(r.error().code), kExitPermission);
}

TEST(JudgeSocketTrustTest, AnotherUsersSocketIsRefused) {
  auto r = Judge(Dir(kMe, 0700), Sock(kMallory));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(r.error().message,
            "refusing the daemon socket /tmp/gpuman-1001/gpuman.sock: it belongs to mallory (uid 1002), not to you "
            "or root");
}

TEST(JudgeSocketTrustTest, AnOwnerWithoutANameIsNamedByUid) {
  auto r = Judge(Dir(4242, 0700), Sock(kMe));
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("its directory belongs to uid 4242, not to you or root"), std::string::npos)
      << r.error().message;
}

TEST(JudgeSocketTrustTest, SymbolicLinksAreRefused) {
  auto link_dir = Judge(FileFacts{kMe, S_IFLNK | 0777}, Sock(kMe));
  ASSERT_FALSE(link_dir.has_value());
  EXPECT_NE(link_dir.error().message.find("its directory /tmp/gpuman-1001 is a symbolic link"), std::string::npos);
  auto link_sock = Judge(Dir(kMe, 0700), FileFacts{kMe, S_IFLNK | 0777});
  ASSERT_FALSE(link_sock.has_value());
  EXPECT_EQ(link_sock.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(link_sock.error().message.find(": it is a symbolic link"), std::string::npos);
}

TEST(JudgeSocketTrustTest, DirectoriesOthersMayWriteAreRefusedStickyOrNot) {
  for (uint32_t mode : {0777u, 0770u, 0720u, 0702u, 01777u}) {
    for (uint32_t owner : {0u, kMe}) {
      auto r = Judge(Dir(owner, mode), Sock(kMe));
      ASSERT_FALSE(r.has_value()) << std::oct << mode;
      EXPECT_EQ(r.error().code, ErrorCode::kPermissionDenied);
      EXPECT_NE(r.error().message.find("is writable by others"), std::string::npos) << r.error().message;
    }
  }
  auto r = Judge(Dir(0, 01777), Sock(kMe));
  EXPECT_NE(r.error().message.find("(owned by root (uid 0)) is writable by others (mode 1777)"), std::string::npos)
      << r.error().message;
}

TEST(JudgeSocketTrustTest, SomethingElseThanASocketIsRefused) {
  auto r = Judge(Dir(kMe, 0700), FileFacts{kMe, S_IFREG | 0600});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("it is not a socket"), std::string::npos);
}

TEST(JudgeSocketTrustTest, RootTrustsOnlyRoot) {
  EXPECT_TRUE(Judge(Dir(0, 0755), Sock(0), 0).has_value());
  EXPECT_FALSE(Judge(Dir(kMe, 0700), Sock(kMe), 0).has_value()) << "root does not talk to a user's daemon";
}

TEST(CheckPeerTrustTest, RootOrMyselfOnly) {
  EXPECT_TRUE(CheckPeerTrust(kPath, 0, kMe, Names).has_value());
  EXPECT_TRUE(CheckPeerTrust(kPath, kMe, kMe, Names).has_value());
  auto r = CheckPeerTrust(kPath, kMallory, kMe, Names);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(r.error().message,
            "refusing the daemon socket /tmp/gpuman-1001/gpuman.sock: the daemon on it runs as mallory (uid 1002), "
            "not as you or root");
}

// A listening socket at `path`, created by this process.
int Listen(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 4) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(CheckSocketTrustTest, OnTheFileSystem) {
  TempDir dir;  // mkdtemp: ours, 0700
  const std::string path = dir.Join("gpuman.sock");
  auto missing = CheckSocketTrust(path, getuid());
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kUnavailable) << "no socket: no daemon, not a refusal";

  int fd = Listen(path);
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(CheckSocketTrust(path, getuid()).has_value());

  const std::string link = dir.Join("link.sock");
  ASSERT_EQ(symlink(path.c_str(), link.c_str()), 0);
  auto linked = CheckSocketTrust(link, getuid());
  ASSERT_FALSE(linked.has_value());
  EXPECT_EQ(linked.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(linked.error().message.find("it is a symbolic link"), std::string::npos);

  ASSERT_EQ(chmod(dir.path().c_str(), 0777), 0);
  auto open_dir = CheckSocketTrust(path, getuid());
  ASSERT_FALSE(open_dir.has_value());
  EXPECT_EQ(open_dir.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(open_dir.error().message.find("writable by others (mode 0777)"), std::string::npos);
  auto missing_in_open_dir = CheckSocketTrust(dir.Join("none.sock"), getuid());
  EXPECT_EQ(missing_in_open_dir.error().code, ErrorCode::kPermissionDenied) << "the directory is judged first";
  close(fd);
}

TEST(CheckSocketTrustTest, ADirectoryOfAnotherUid) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to chown";
  TempDir dir;
  const std::string path = dir.Join("gpuman.sock");
  int fd = Listen(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(chown(dir.path().c_str(), 54321, 54321), 0);
  auto r = CheckSocketTrust(path, 0);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message, "refusing the daemon socket " + path + ": its directory belongs to " +
                                   (PasswdUserName(54321).empty() ? "uid 54321" : PasswdUserName(54321) + " (uid 54321)") +
                                   ", not to you or root");
  close(fd);
}

// Root's directory, root's socket, but the process listening on it dropped to another uid
// before listen(2): SO_PEERCRED names it, and Connect refuses before sending a byte.
TEST(DaemonClientTrustTest, ConnectRefusesAPeerOfAnotherUidAndSendsNothing) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to listen as another uid";
  TempDir dir;
  chmod(dir.path().c_str(), 0755);
  const std::string path = dir.Join("gpuman.sock");
  int ready[2], report[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(report), 0);
  pid_t child = fork();
  if (child == 0) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) _exit(2);
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
    if (listen(fd, 4) != 0) _exit(4);
    (void)!write(ready[1], "r", 1);
    int conn = accept(fd, nullptr, nullptr);
    char buf[256];
    ssize_t total = 0;
    pollfd p{conn, POLLIN, 0};
    while (poll(&p, 1, 5000) > 0) {
      ssize_t n = read(conn, buf, sizeof buf);
      if (n <= 0) break;
      total += n;
    }
    (void)!write(report[1], &total, sizeof total);
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  auto client = DaemonClient::Connect(path);
  ASSERT_FALSE(client.has_value());
  EXPECT_EQ(client.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(client.error().message.find("refusing the daemon socket " + path + ": the daemon on it runs as "),
            std::string::npos)
      << client.error().message;
  EXPECT_NE(client.error().message.find("(uid 65534), not as you or root"), std::string::npos) << client.error().message;
  ssize_t received = -1;
  ASSERT_EQ(read(report[0], &received, sizeof received), static_cast<ssize_t>(sizeof received));
  EXPECT_EQ(received, 0) << "not even the hello reached the other uid";
  int status = 0;
  waitpid(child, &status, 0);
  for (int fd : {ready[0], ready[1], report[0], report[1]}) close(fd);
}

}  // namespace
}  // namespace gpuman::cli
