// Result<T> and Error: errors as values, as described in STYLE.md section 3.
// Member names copy std::expected (has_value, value, error, *, ->) so moving to
// C++23 is an alias change. Thread-compatible value types; no globals.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace gpuman {

/// Small, stable set of error kinds. Mapped once to exit codes (cli/exit_codes.cc).
enum class ErrorCode {
  kInvalidArgument,
  kNotFound,
  kPermissionDenied,
  kConflict,
  kUnavailable,  // driver / NVML / daemon cannot be reached
  kBusy,
  kIo,
  kInternal,
};

/// Lower-case name of an ErrorCode ("invalid_argument", ...), stable for JSON.
const char* ErrorCodeName(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;  // "context: cause", lower case, no trailing period

  /// Returns a copy with "context: " prepended to the message.
  Error WithContext(const std::string& context) const {
    return Error{code, context + ": " + message};
  }
};

inline Error MakeError(ErrorCode code, std::string message) {
  return Error{code, std::move(message)};
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}           // NOLINT: implicit by design
  Result(Error error) : data_(std::move(error)) {}       // NOLINT: implicit by design

  bool has_value() const { return data_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & { return std::get<0>(data_); }
  const T& value() const& { return std::get<0>(data_); }
  T&& value() && { return std::get<0>(std::move(data_)); }
  const Error& error() const { return std::get<1>(data_); }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Error> data_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT
  bool has_value() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace gpuman

/// Aborts with file and line when an invariant is broken, in release builds too.
#define GPUMAN_CHECK(cond)                                                        \
  do {                                                                            \
    if (!(cond)) {                                                                \
      std::fprintf(stderr, "gpuman: internal error: %s:%d: check failed: %s\n", \
                   __FILE__, __LINE__, #cond);                                    \
      std::abort();                                                               \
    }                                                                             \
  } while (0)
