#include "health/kernel_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/posix_error.h"
#include "base/strings.h"

namespace gpuman::health {
namespace {

bool IsHex(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Leading decimal number of `s`, or nullopt.
std::optional<int64_t> LeadingNumber(std::string_view s, size_t* used) {
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == 0 || i > 12) return std::nullopt;
  *used = i;
  return ParseInt(s.substr(0, i));
}

}  // namespace

std::optional<std::string> NormalizeBusId(std::string_view bus) {
  // domain:bus:device[.function]
  auto parts = Split(bus, ':');
  if (parts.size() != 3) return std::nullopt;
  std::string dev = parts[2];
  if (auto dot = dev.find('.'); dot != std::string::npos) dev = dev.substr(0, dot);
  if (!IsHex(parts[0]) || !IsHex(parts[1]) || !IsHex(dev) || parts[0].size() > 8 || parts[1].size() > 2 ||
      dev.size() > 2) {
    return std::nullopt;
  }
  unsigned domain = std::stoul(parts[0], nullptr, 16), b = std::stoul(parts[1], nullptr, 16),
           d = std::stoul(dev, nullptr, 16);
  char out[32];
  std::snprintf(out, sizeof out, "%08X:%02X:%02X.0", domain, b, d);
  return std::string(out);
}

std::optional<model::XidEvent> ParseXidLine(std::string_view line) {
  constexpr std::string_view kTag = "NVRM: Xid (";
  size_t at = line.find(kTag);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = line.substr(at + kTag.size());
  if (rest.substr(0, 4) == "PCI:") rest.remove_prefix(4);
  size_t close = rest.find("):");
  if (close == std::string_view::npos) return std::nullopt;
  auto bus = NormalizeBusId(rest.substr(0, close));
  rest.remove_prefix(close + 2);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  size_t used = 0;
  auto xid = LeadingNumber(rest, &used);
  if (!xid || *xid <= 0 || *xid > 100000) return std::nullopt;
  model::XidEvent ev;
  ev.pci_bus_id = bus;
  ev.xid = static_cast<int>(*xid);
  ev.source = "kernel_log";
  ev.text = std::string(Trim(line.substr(at)));
  return ev;
}

std::optional<model::XidEvent> ParseKmsgRecord(std::string_view record, int64_t boot_unix_ms,
                                               int64_t now_unix_ms) {
  size_t semi = record.find(';');
  if (semi == std::string_view::npos) return std::nullopt;
  auto ev = ParseXidLine(record.substr(semi + 1, record.find('\n', semi) - semi - 1));
  if (!ev) return std::nullopt;
  auto fields = Split(record.substr(0, semi), ',');
  std::optional<int64_t> usec = fields.size() >= 3 ? ParseInt(fields[2]) : std::nullopt;
  ev->at_unix_ms = usec && *usec >= 0 ? boot_unix_ms + *usec / 1000 : now_unix_ms;
  return ev;
}

std::optional<model::XidEvent> ParseKernelLogTextLine(std::string_view line, int64_t boot_unix_ms,
                                                      int64_t now_unix_ms) {
  auto ev = ParseXidLine(line);
  if (!ev) return std::nullopt;
  ev->at_unix_ms = now_unix_ms;
  // dmesg's "[  123.456789] " prefix: seconds since boot. Only a finite, non-negative
  // count below ~300 years is used: "[1e300]" or "[nan]" would not fit an int64_t.
  if (!line.empty() && line.front() == '[') {
    size_t close = line.find(']');
    std::string secs(Trim(line.substr(1, close == std::string_view::npos ? 0 : close - 1)));
    char* end = nullptr;
    double s = std::strtod(secs.c_str(), &end);
    if (end && *end == '\0' && !secs.empty() && s >= 0 && s < 1e10) {
      ev->at_unix_ms = boot_unix_ms + static_cast<int64_t>(s * 1000);
    }
  }
  return ev;
}

int64_t BootTimeUnixMs() {
  timespec real{}, boot{};
  clock_gettime(CLOCK_REALTIME, &real);
  clock_gettime(CLOCK_BOOTTIME, &boot);
  int64_t real_ms = static_cast<int64_t>(real.tv_sec) * 1000 + real.tv_nsec / 1000000;
  int64_t boot_ms = static_cast<int64_t>(boot.tv_sec) * 1000 + boot.tv_nsec / 1000000;
  return real_ms - boot_ms;
}

Result<std::unique_ptr<KernelLogReader>> KernelLogReader::Open(const std::string& path, int64_t boot_unix_ms) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    int e = errno;
    ErrorCode code = e == EACCES || e == EPERM ? ErrorCode::kPermissionDenied
                     : e == ENOENT           ? ErrorCode::kNotFound
                                             : ErrorCode::kIo;
    return MakeError(code, "kernel log " + path + ": " + ErrnoDescription(e));
  }
  struct stat st{};
  fstat(fd.get(), &st);
  auto reader = std::unique_ptr<KernelLogReader>(new KernelLogReader);
  reader->path_ = path;
  reader->fd_ = std::move(fd);
  reader->kmsg_ = S_ISCHR(st.st_mode);
  reader->boot_unix_ms_ = boot_unix_ms;
  return reader;
}

KernelLogReader::~KernelLogReader() = default;

Result<std::vector<model::XidEvent>> KernelLogReader::Read(int64_t now_unix_ms) {
  std::vector<model::XidEvent> out;
  if (kmsg_) {
    // One record per read(); EAGAIN at the end; EPIPE when records were overwritten
    // before we read them (then the next read continues with the oldest one left).
    char record[8192];
    for (int i = 0; i < 100000; ++i) {
      ssize_t n = read(fd_.get(), record, sizeof record - 1);
      if (n < 0) {
        if (errno == EPIPE || errno == EINTR) continue;
        if (errno == EAGAIN) break;
        return MakeError(ErrorCode::kIo, "read " + path_ + ": " + ErrnoDescription(errno));
      }
      if (n == 0) break;
      auto ev = ParseKmsgRecord(std::string_view(record, static_cast<size_t>(n)), boot_unix_ms_, now_unix_ms);
      if (!ev) continue;
      out.push_back(std::move(*ev));
    }
    return out;
  }
  // A text file: read what was appended since last time.
  struct stat st{};
  if (fstat(fd_.get(), &st) == 0 && st.st_size < offset_) {  // truncated or rotated in place
    offset_ = 0;
    partial_.clear();
  }
  char buf[65536];
  while (true) {
    ssize_t n = pread(fd_.get(), buf, sizeof buf, offset_);
    if (n < 0) {
      if (errno == EINTR) continue;
      return MakeError(ErrorCode::kIo, "read " + path_ + ": " + ErrnoDescription(errno));
    }
    if (n == 0) break;
    offset_ += n;
    partial_.append(buf, static_cast<size_t>(n));
  }
  size_t start = 0;
  for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
    auto ev = ParseKernelLogTextLine(std::string_view(partial_.data() + start, nl - start), boot_unix_ms_,
                                     now_unix_ms);
    if (!ev) continue;
    out.push_back(std::move(*ev));
  }
  partial_.erase(0, start);
  return out;
}

}  // namespace gpuman::health
