#include "base/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/unique_fd.h"

namespace gpuman {

std::optional<std::string> ReadWholeFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return std::nullopt;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || S_ISDIR(st.st_mode)) return std::nullopt;
  std::string out;
  // One more byte than the size, so a regular file ends in one read plus the EOF read.
  size_t chunk = st.st_size > 0 ? static_cast<size_t>(st.st_size) + 1 : 4096;
  for (;;) {
    const size_t used = out.size();
    out.resize(used + chunk);
    const ssize_t n = ::read(fd.get(), out.data() + used, chunk);
    if (n < 0) {
      if (errno == EINTR) {
        out.resize(used);
        continue;
      }
      return std::nullopt;
    }
    out.resize(used + static_cast<size_t>(n));
    if (n == 0) return out;
    chunk = 4096;
  }
}

}  // namespace gpuman
