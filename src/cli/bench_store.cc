#include "cli/bench_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/file.h"
#include "base/posix_error.h"
#include "base/unique_fd.h"

namespace gpuman::cli {

using json = nlohmann::json;

BenchPaths BenchFilePaths(const Environment& env, uid_t uid) {
  BenchPaths paths;
  if (auto f = env.Get("GPUMAN_BENCH_FILE"); f && !f->empty()) {
    paths.write = *f;
    paths.read = {*f};
    return paths;
  }
  paths.read.push_back(kMachineBenchFile);
  if (uid == 0) {
    paths.write = kMachineBenchFile;
    return paths;
  }
  std::string cache;
  if (auto x = env.Get("XDG_CACHE_HOME"); x && !x->empty() && (*x)[0] == '/') {
    cache = *x;
  } else if (auto home = env.Get("HOME"); home && !home->empty()) {
    cache = *home + "/.cache";
  }
  if (!cache.empty()) {
    paths.write = cache + "/gpuman/bench.json";
    paths.read.push_back(paths.write);
  }
  return paths;
}

Result<std::map<std::string, BenchRecord>> ReadBenchFile(const std::string& path) {
  std::map<std::string, BenchRecord> records;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return records;
  auto text = ReadWholeFile(path);
  if (!text) return MakeError(ErrorCode::kIo, "bench file " + path + ": cannot read it: " + PosixErrorText(errno));
  json j = json::parse(*text, nullptr, false);
  auto bad = [&](const std::string& why) { return MakeError(ErrorCode::kIo, "bench file " + path + ": " + why); };
  if (j.is_discarded() || !j.is_object() || !j.contains("gpus") || !j["gpus"].is_object()) {
    return bad("not gpuman's format (an object with \"gpus\")");
  }
  for (const auto& [uuid, g] : j["gpus"].items()) {
    if (!g.is_object() || !g.contains("fp32_tflops") || !g["fp32_tflops"].is_number()) {
      return bad("GPU " + uuid + " has no number \"fp32_tflops\"");
    }
    BenchRecord r;
    r.uuid = uuid;
    r.fp32_tflops = g["fp32_tflops"].get<double>();
    if (!std::isfinite(r.fp32_tflops) || r.fp32_tflops <= 0) return bad("GPU " + uuid + ": fp32_tflops must be > 0");
    if (g.contains("memory_gbps") && g["memory_gbps"].is_number()) r.memory_gbps = g["memory_gbps"].get<double>();
    if (g.contains("measured_unix_ms") && g["measured_unix_ms"].is_number_integer()) {
      r.measured_unix_ms = g["measured_unix_ms"].get<int64_t>();
    }
    if (g.contains("name") && g["name"].is_string()) r.name = g["name"].get<std::string>();
    if (g.contains("driver_version") && g["driver_version"].is_string()) r.driver_version = g["driver_version"].get<std::string>();
    if (g.contains("cuda_version") && g["cuda_version"].is_string()) r.cuda_version = g["cuda_version"].get<std::string>();
    records[uuid] = std::move(r);
  }
  return records;
}

Status WriteBenchFile(const std::string& path, const std::map<std::string, BenchRecord>& records) {
  json gpus = json::object();
  for (const auto& [uuid, r] : records) {
    gpus[uuid] = {{"name", r.name},
                  {"fp32_tflops", r.fp32_tflops},
                  {"memory_gbps", r.memory_gbps},
                  {"measured_unix_ms", r.measured_unix_ms},
                  {"driver_version", r.driver_version},
                  {"cuda_version", r.cuda_version}};
  }
  const std::string text = json{{"version", 1}, {"gpus", gpus}}.dump(2) + "\n";
  auto fail = [&](const std::string& what) {
    return MakeError(ErrorCode::kIo, "bench file " + path + ": " + what + ": " + PosixErrorText(errno));
  };
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    if (!std::filesystem::exists(dir, ec)) {
      std::filesystem::create_directories(dir, ec);
      if (ec) {
        errno = ec.value();
        return fail("create " + dir.string());
      }
      (void)::chmod(dir.c_str(), path == kMachineBenchFile ? 0711 : 0700);
    }
  }
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd) return fail("create " + tmp);
  (void)::fchmod(fd.get(), 0644);
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::unlink(tmp.c_str());
      return fail("write");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return fail("replace");
  }
  return {};
}

std::map<std::string, double> MeasuredFp32(const BenchPaths& paths, std::vector<std::string>& warnings) {
  std::map<std::string, BenchRecord> newest;
  for (const std::string& path : paths.read) {
    auto records = ReadBenchFile(path);
    if (!records) {
      warnings.push_back(records.error().message + " (ignored: --prefer fastest uses the computed peak there)");
      continue;
    }
    for (auto& [uuid, r] : *records) {
      auto it = newest.find(uuid);
      if (it == newest.end() || r.measured_unix_ms >= it->second.measured_unix_ms) newest[uuid] = r;
    }
  }
  std::map<std::string, double> out;
  for (const auto& [uuid, r] : newest) out[uuid] = r.fp32_tflops;
  return out;
}

}  // namespace gpuman::cli
