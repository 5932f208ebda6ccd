// Status and StatusOr: how every failure a user's input can cause travels back to the caller.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace onnxamp {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // malformed input: a corrupt file, a bad attribute, a wrong shape
  kNotFound,            // a file, value or tensor that should exist does not
  kUnimplemented,       // valid input we do not support (an op, a dtype, an IR version)
  kOutOfRange,          // sizes, offsets or values outside what is allowed
  kResourceExhausted,   // more memory or disk than there is
  kIoError,             // the operating system refused a read or write
  kFailedPrecondition,  // the object is in the wrong state for the request
  kInternal,            // a bug in onnxamp
};

const char* StatusCodeName(StatusCode code);

// Concatenates any streamable values into one string.
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is "<context>: <message>".
  Status WithContext(std::string_view context) const;

  // "OK" or "<CodeName>: <message>".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename... Args>
Status InvalidArgument(const Args&... args) {
  return Status(StatusCode::kInvalidArgument, StrCat(args...));
}
template <typename... Args>
Status NotFound(const Args&... args) {
  return Status(StatusCode::kNotFound, StrCat(args...));
}
template <typename... Args>
Status Unimplemented(const Args&... args) {
  return Status(StatusCode::kUnimplemented, StrCat(args...));
}
template <typename... Args>
Status OutOfRange(const Args&... args) {
  return Status(StatusCode::kOutOfRange, StrCat(args...));
}
template <typename... Args>
Status ResourceExhausted(const Args&... args) {
  return Status(StatusCode::kResourceExhausted, StrCat(args...));
}
template <typename... Args>
Status IoError(const Args&... args) {
  return Status(StatusCode::kIoError, StrCat(args...));
}
template <typename... Args>
Status FailedPrecondition(const Args&... args) {
  return Status(StatusCode::kFailedPrecondition, StrCat(args...));
}
template <typename... Args>
Status Internal(const Args&... args) {
  return Status(StatusCode::kInternal, StrCat(args...));
}

// Holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : status_(status) {  // NOLINT(runtime/explicit)
    if (status_.ok()) status_ = Internal("StatusOr constructed from an OK status without a value");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT(runtime/explicit)

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

[[noreturn]] void CheckFailed(const char* file, int line, const char* condition, const std::string& message);

}  // namespace onnxamp

#define ONNXAMP_CONCAT_INNER(a, b) a##b
#define ONNXAMP_CONCAT(a, b) ONNXAMP_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define ONNXAMP_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::onnxamp::Status onnxamp_status_ = (expr);        \
    if (!onnxamp_status_.ok()) return onnxamp_status_; \
  } while (0)

// `lhs = value of expr` (a StatusOr), or returns its Status from the enclosing function.
#define ONNXAMP_ASSIGN_OR_RETURN(lhs, expr) \
  ONNXAMP_ASSIGN_OR_RETURN_IMPL(ONNXAMP_CONCAT(onnxamp_statusor_, __LINE__), lhs, expr)
#define ONNXAMP_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

// Aborts with a message when an internal invariant is broken. Never for user input.
#define ONNXAMP_CHECK(cond, ...)                                                                                      \
  do {                                                                                                                \
    if (!(cond)) ::onnxamp::CheckFailed(__FILE__, __LINE__, #cond, ::onnxamp::StrCat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
