#include "slurm/job_record.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/posix_error.h"
#include "base/strings.h"
#include "base/unique_fd.h"

namespace gpuman::slurm {

namespace {

using nlohmann::json;

bool IsGpuUuid(const std::string& s) {
  return s.size() > 4 && s.size() <= 96 && (s.rfind("GPU-", 0) == 0 || s.rfind("MIG-", 0) == 0) &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return c > 0x20 && c < 0x7f; });
}

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Numeric job ids in numeric order, then the rest by text.
bool JobIdLess(const std::string& a, const std::string& b) {
  auto na = ParseInt(a), nb = ParseInt(b);
  if (na && nb) return *na < *nb;
  if (na != nb) return na.has_value();  // numbers first
  return a < b;
}

}  // namespace

std::string SlurmStateDir(const std::optional<std::string>& config_value, const char* env_value) {
  if (config_value && !config_value->empty()) return *config_value;
  if (env_value != nullptr && *env_value != '\0') return env_value;
  return kDefaultSlurmStateDir;
}

bool IsValidJobId(std::string_view id) {
  if (id.empty() || id.size() > 64 || id.front() == '.') return false;
  return std::all_of(id.begin(), id.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '.' || c == '+' || c == '-';
  });
}

bool LooksLikeSlurmJobId(std::string_view id) {
  auto digits = [](std::string_view s) {
    return !s.empty() && s.size() <= 20 && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
  };
  const size_t sep = id.find_first_of("_+");
  if (sep == std::string_view::npos) return digits(id);
  return digits(id.substr(0, sep)) && digits(id.substr(sep + 1));
}

std::string JobRecordToJson(const SlurmJobRecord& rec) {
  json j = {{"schema", kJobRecordSchema}, {"job_id", rec.job_id}, {"user", rec.user}, {"uid", rec.uid},
            {"host", rec.host},           {"gpus", rec.gpu_uuids}, {"started_unix_ms", rec.started_unix_ms}};
  j["ended_unix_ms"] = rec.ended_unix_ms ? json(*rec.ended_unix_ms) : json(nullptr);
  // Replace, not throw, on invalid UTF-8 (a user name from outside).
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<SlurmJobRecord> JobRecordFromJson(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return MakeError(ErrorCode::kInvalidArgument, "not JSON");
  if (!j.is_object()) return MakeError(ErrorCode::kInvalidArgument, "not a JSON object");
  auto bad = [](const std::string& what) { return MakeError(ErrorCode::kInvalidArgument, what); };
  auto schema = j.find("schema");
  if (schema == j.end() || !schema->is_number_integer()) return bad("missing \"schema\"");
  if (schema->get<int64_t>() != kJobRecordSchema) {
    return bad("schema " + schema->dump() + " (this gpuman reads schema " + std::to_string(kJobRecordSchema) + ")");
  }
  SlurmJobRecord rec;
  auto str = [&](const char* key, std::string& out) -> bool {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return false;
    out = it->get<std::string>();
    return true;
  };
  if (!str("job_id", rec.job_id) || !IsValidJobId(rec.job_id)) return bad("\"job_id\" missing or invalid");
  if (!str("user", rec.user)) return bad("\"user\" missing or not a string");
  if (!str("host", rec.host)) return bad("\"host\" missing or not a string");
  auto uid = j.find("uid");
  if (uid == j.end() || !uid->is_number_unsigned() || uid->get<uint64_t>() > UINT32_MAX) {
    return bad("\"uid\" missing or not a uid");
  }
  rec.uid = static_cast<uint32_t>(uid->get<uint64_t>());
  auto gpus = j.find("gpus");
  if (gpus == j.end() || !gpus->is_array()) return bad("\"gpus\" missing or not an array");
  for (const auto& g : *gpus) {
    if (!g.is_string() || !IsGpuUuid(g.get<std::string>())) return bad("\"gpus\" holds a value that is not a GPU UUID");
    rec.gpu_uuids.push_back(g.get<std::string>());
  }
  auto started = j.find("started_unix_ms");
  if (started == j.end() || !started->is_number_integer()) return bad("\"started_unix_ms\" missing or not an integer");
  rec.started_unix_ms = started->get<int64_t>();
  auto ended = j.find("ended_unix_ms");
  if (ended != j.end() && !ended->is_null()) {
    if (!ended->is_number_integer()) return bad("\"ended_unix_ms\" not an integer or null");
    rec.ended_unix_ms = ended->get<int64_t>();
  }
  return rec;
}

std::string JobRecordPath(const std::string& dir, const std::string& job_id) {
  return dir + "/" + job_id + ".json";
}

Status WriteJobRecord(const std::string& dir, const SlurmJobRecord& rec) {
  if (!IsValidJobId(rec.job_id)) {
    return MakeError(ErrorCode::kInvalidArgument, "slurm job id '" + EscapeControl(rec.job_id) + "' is not valid");
  }
  for (const auto& u : rec.gpu_uuids) {
    if (!IsGpuUuid(u)) return MakeError(ErrorCode::kInvalidArgument, "'" + EscapeControl(u) + "' is not a GPU UUID");
  }
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return PosixError(ErrorCode::kIo, "create " + dir, errno);
  const std::string path = JobRecordPath(dir, rec.job_id);
  const std::string tmp = dir + "/." + rec.job_id + ".json." + std::to_string(getpid()) + ".tmp";
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd) return PosixError(ErrorCode::kIo, "write " + tmp, errno);
  fchmod(fd.get(), 0644);  // whatever the umask
  const std::string text = JobRecordToJson(rec) + "\n";
  int err = 0;
  if (!WriteAll(fd.get(), text)) err = errno;
  if (err == 0 && fsync(fd.get()) != 0) err = errno;
  if (int closed = fd.Close(); closed != 0 && err == 0) err = closed;
  if (err == 0 && rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    unlink(tmp.c_str());
    return PosixError(ErrorCode::kIo, "write " + path, err);
  }
  // Make the rename durable; a failure here leaves a complete file either way.
  if (UniqueFd dfd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)); dfd) fsync(dfd.get());
  return {};
}

Result<SlurmJobRecord> ReadJobRecord(const std::string& dir, const std::string& job_id) {
  if (!IsValidJobId(job_id)) {
    return MakeError(ErrorCode::kInvalidArgument, "slurm job id '" + EscapeControl(job_id) + "' is not valid");
  }
  const std::string path = JobRecordPath(dir, job_id);
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd) {
    if (errno == ENOENT) return MakeError(ErrorCode::kNotFound, "no record of slurm job " + job_id + " in " + dir);
    return PosixError(ErrorCode::kIo, "read " + path, errno);
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return MakeError(ErrorCode::kInvalidArgument, path + ": not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxJobRecordBytes) {
    return MakeError(ErrorCode::kInvalidArgument, path + ": larger than " + std::to_string(kMaxJobRecordBytes) +
                                                      " bytes, not a job record");
  }
  std::string text;
  char buf[4096];
  int err = 0;
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) err = errno;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxJobRecordBytes) break;
  }
  fd.reset();
  if (err != 0) return PosixError(ErrorCode::kIo, "read " + path, err);
  auto rec = JobRecordFromJson(text);
  if (!rec) return rec.error().WithContext(path);
  if (rec->job_id != job_id) {
    return MakeError(ErrorCode::kInvalidArgument,
                     path + ": holds job " + rec->job_id + ", not " + job_id);
  }
  return rec;
}

Result<std::vector<SlurmJobRecord>> ListJobRecords(const std::string& dir, std::vector<std::string>* problems) {
  std::vector<SlurmJobRecord> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return out;
    return PosixError(ErrorCode::kIo, "read " + dir, errno);
  }
  std::vector<std::string> ids;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.empty() || name[0] == '.') continue;
    if (name.size() <= 5 || name.compare(name.size() - 5, 5, ".json") != 0) continue;
    ids.push_back(name.substr(0, name.size() - 5));
  }
  closedir(d);
  std::sort(ids.begin(), ids.end(), JobIdLess);
  for (const auto& id : ids) {
    if (!IsValidJobId(id)) {
      if (problems) problems->push_back(dir + "/" + EscapeControl(id) + ".json: not named <job id>.json");
      continue;
    }
    auto rec = ReadJobRecord(dir, id);
    if (!rec) {
      if (rec.error().code == ErrorCode::kNotFound) continue;  // removed meanwhile
      if (problems) problems->push_back(rec.error().message);
      continue;
    }
    out.push_back(std::move(*rec));
  }
  return out;
}

const SlurmJobRecord* JobHoldingGpu(const std::vector<SlurmJobRecord>& records, std::string_view gpu_uuid,
                                    int64_t unix_ms) {
  const SlurmJobRecord* best = nullptr;
  for (const auto& r : records) {
    if (!r.HeldAt(unix_ms)) continue;
    if (std::find(r.gpu_uuids.begin(), r.gpu_uuids.end(), gpu_uuid) == r.gpu_uuids.end()) continue;
    if (best == nullptr || r.started_unix_ms > best->started_unix_ms) best = &r;
  }
  return best;
}

const std::vector<SlurmJobRecord>& JobRecordCache::Get(int64_t now, std::vector<std::string>* problems) {
  struct stat st {};
  int64_t mtime_ns = -1, ino = -1;
  if (::stat(dir_.c_str(), &st) == 0) {
    mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    ino = static_cast<int64_t>(st.st_ino);
  }
  if (have_ && !racy_ && mtime_ns == mtime_ns_ && ino == ino_ && now - read_at_ms_ < max_age_ms_ &&
      now >= read_at_ms_) {
    return records_;
  }
  // A directory changed within the last 2 s may change again within the same timestamp
  // tick (file systems stamp with a coarse clock): read it again next time too.
  struct timespec real {};
  clock_gettime(CLOCK_REALTIME, &real);
  const int64_t real_ns = static_cast<int64_t>(real.tv_sec) * 1'000'000'000 + real.tv_nsec;
  racy_ = mtime_ns >= 0 && real_ns - mtime_ns < 2'000'000'000;
  have_ = true;
  mtime_ns_ = mtime_ns;
  ino_ = ino;
  read_at_ms_ = now;
  ++reads_;
  records_.clear();
  if (mtime_ns < 0) return records_;  // no directory (yet): no Slurm jobs
  std::vector<std::string> found;
  auto list = ListJobRecords(dir_, &found);
  if (!list) {
    found.push_back(list.error().message);
  } else {
    records_ = std::move(*list);
  }
  if (problems) *problems = std::move(found);
  return records_;
}

}  // namespace gpuman::slurm
