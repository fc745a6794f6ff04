// Benchmark of the daemon's fairness (docs/protocol.md, "Limits"): a private daemon on the
// stand-in NVML (idle 8-GPU scenario); one client holds many idle connections, another
// pipelines a flood of status/queue requests, and a third, normal client measures the
// round trip of its `queue` requests (p50/p99): without the flood, while the flooder does
// not read its replies (the daemon stops reading from it), and while it reads them (a
// sustained flood). Also the daemon's resident memory after each phase. Prints figures and
// ratios; asserts nothing.
// Usage: flood_bench [--samples N] [--idle N] [--flood N]
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "cli/daemon_client.h"
#include "protocol/framing.h"

using gpuman::cli::DaemonClient;
namespace protocol = gpuman::protocol;

namespace {

int ConnectTo(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

std::string Frame(int64_t id, protocol::RequestArgs args) {
  auto frame = protocol::EncodeRequestFrame(protocol::Request{id, std::move(args)});
  return frame ? *frame : std::string();
}

bool WriteAll(int fd, const std::string& bytes, const std::atomic<bool>& stop) {
  for (size_t sent = 0; sent < bytes.size() && !stop;) {
    ssize_t w = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (w <= 0) return false;
    sent += static_cast<size_t>(w);
  }
  return true;
}

long RssKb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

struct Figures {
  double p50 = 0, p99 = 0, max = 0;
};

// `samples` round trips of `queue` over one connection, 2 ms apart.
Figures Measure(DaemonClient& client, int samples) {
  std::vector<double> ms;
  for (int i = 0; i < samples; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = client.Call<protocol::QueueResult>(protocol::QueueArgs{false});
    if (!r) {
      std::fprintf(stderr, "flood_bench: queue: %s\n", r.error().message.c_str());
      std::exit(1);
    }
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::sort(ms.begin(), ms.end());
  Figures f;
  f.p50 = ms[ms.size() / 2];
  f.p99 = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  f.max = ms.back();
  return f;
}

void Print(const char* what, const Figures& f, const Figures& base, long rss_kb) {
  std::printf("%-34s p50 %7.3f ms  p99 %7.3f ms  max %7.2f ms  (p50 x%.1f, p99 x%.1f)  daemon RSS %ld MB\n", what,
              f.p50, f.p99, f.max, base.p50 > 0 ? f.p50 / base.p50 : 0, base.p99 > 0 ? f.p99 / base.p99 : 0,
              rss_kb / 1024);
}

// A hello'd raw connection.
int Hello(const std::string& socket) {
  int fd = ConnectTo(socket);
  std::atomic<bool> never{false};
  if (fd < 0 || !WriteAll(fd, Frame(1, protocol::HelloArgs{"flood_bench", 1}), never)) return -1;
  char buf[4096];
  if (read(fd, buf, sizeof buf) <= 0) return -1;
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  int samples = 500, idle = 48, flood = 100000;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--samples") samples = std::max(10, std::atoi(argv[i + 1]));
    if (a == "--idle") idle = std::max(0, std::atoi(argv[i + 1]));
    if (a == "--flood") flood = std::max(1, std::atoi(argv[i + 1]));
  }
  char tmpl[] = "/tmp/gpuman-flood-bench-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::string scenario_path = gpuman::bench::IdleScenario(GPUMAN_BENCH_SCENARIO_DIR, "h100-8", dir);
  std::string socket = dir + "/gpuman.sock";
  pid_t daemon = fork();
  if (daemon == 0) {
    unsetenv("GPUMAN_SIMULATE");
    execl(GPUMAN_BENCH_GPUMAN, GPUMAN_BENCH_GPUMAN, "--simulate", scenario_path.c_str(), "daemon", "--socket",
          socket.c_str(), "--state-dir", (dir + "/state").c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  std::unique_ptr<DaemonClient> client;
  for (int i = 0; i < 250 && !client; ++i) {
    if (auto c = DaemonClient::Connect(socket)) client = std::move(*c);
    else std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!client) {
    std::fprintf(stderr, "flood_bench: the daemon did not start\n");
    return 1;
  }
  // A few queued jobs, so that `queue` has something to say (they never fit: no GPU has
  // that much free memory).
  for (int i = 0; i < 20; ++i) {
    protocol::SubmitArgs s;
    s.argv = {"true"};
    s.cwd = dir;
    s.output = dir + "/never.log";
    s.request.min_free_memory_bytes = int64_t{1} << 62;
    (void)client->Call<protocol::SubmitResult>(s);
  }

  (void)Measure(*client, 50);  // warm up
  const Figures base = Measure(*client, samples);
  std::printf("flood_bench: %d round trips of `queue` (20 jobs) per phase; %d idle connections; a flood of %d\n"
              "pipelined requests (1 in 20 status, the rest queue --all)\n",
              samples, idle, flood);
  Print("alone", base, base, RssKb(daemon));

  std::vector<int> idle_fds;
  for (int i = 0; i < idle; ++i) idle_fds.push_back(ConnectTo(socket));
  std::string requests;
  for (int i = 0; i < flood; ++i) {
    requests += i % 20 == 0 ? Frame(100 + i, protocol::StatusArgs{}) : Frame(100 + i, protocol::QueueArgs{true});
  }
  int flooder = Hello(socket);
  if (flooder < 0) {
    std::fprintf(stderr, "flood_bench: the flooder could not connect\n");
    return 1;
  }
  std::atomic<bool> stop{false};
  std::thread writer([&] { (void)WriteAll(flooder, requests, stop); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const Figures stalled = Measure(*client, samples);
  Print("flood, replies not read", stalled, base, RssKb(daemon));

  // Now the flooder reads: the flood flows, as fast as the daemon answers it.
  std::atomic<long> replies{0};
  std::thread reader([&] {
    protocol::FrameDecoder decoder;
    char buf[65536];
    while (!stop) {
      ssize_t n = read(flooder, buf, sizeof buf);
      if (n <= 0) return;
      (void)decoder.Feed(std::string_view(buf, static_cast<size_t>(n)));
      while (true) {
        auto frame = decoder.Next();
        if (!frame || !*frame) break;
        if (++replies >= flood) return;
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto t0 = std::chrono::steady_clock::now();
  const long before = replies;
  const Figures flowing = Measure(*client, samples);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const long during = replies - before;
  Print("flood, replies read", flowing, base, RssKb(daemon));
  std::printf("  the flood meanwhile: %.0f requests/s answered%s\n", during / seconds,
              replies >= flood ? " (it ended during the phase: raise --flood)" : "");

  stop = true;
  shutdown(flooder, SHUT_RDWR);
  writer.join();
  reader.join();
  close(flooder);
  for (int fd : idle_fds) close(fd);
  client.reset();
  kill(daemon, SIGTERM);
  int status = 0;
  waitpid(daemon, &status, 0);
  std::filesystem::remove_all(dir);
  return 0;
}
