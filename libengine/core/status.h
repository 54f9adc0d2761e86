// Status and Result<T>: how everything in zinf that can fail at run time reports it.
//
// A Status is a code plus a message written for the person who will read it. Messages name the
// field, the value and what is allowed ("--params: '-3' is negative; expected a positive count").
// Context is added on the way up with with_context() ("hw.node.gpus: ..."), never by re-wording.
// Invariants that only a bug can break use ZINF_CHECK (check.h) instead.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace zinf {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // the user's input is wrong: CLI flag, size string, JSON, profile
  kNotFound,         // a named thing (profile, file) does not exist
  kOutOfMemory,      // a tier's budget cannot hold a request
  kIoError,          // the OS refused or failed an I/O operation
  kInfeasible,       // the request is valid but cannot be satisfied (e.g. a plan that does not fit)
  kInternal,         // a failure that is not the user's fault and not an invariant violation
};

// Short lower-case name of a code, e.g. "invalid argument".
std::string_view error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  static Status invalid_argument(std::string message) { return {ErrorCode::kInvalidArgument, std::move(message)}; }
  static Status not_found(std::string message) { return {ErrorCode::kNotFound, std::move(message)}; }
  static Status out_of_memory(std::string message) { return {ErrorCode::kOutOfMemory, std::move(message)}; }
  static Status io_error(std::string message) { return {ErrorCode::kIoError, std::move(message)}; }
  static Status infeasible(std::string message) { return {ErrorCode::kInfeasible, std::move(message)}; }
  static Status internal(std::string message) { return {ErrorCode::kInternal, std::move(message)}; }

  bool is_ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // The same error with "context: " in front of the message; ok stays ok.
  Status with_context(std::string_view context) const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT(google-explicit-constructor): ergonomic return
  Result(Status status) : status_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool is_ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // Precondition: is_ok(). Accessing the value of an error is a bug, caught by ZINF_CHECK.
  const T& value() const&;
  T& value() &;
  T&& value() &&;
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

[[noreturn]] void fail_result_access(const Status& status);

template <typename T>
const T& Result<T>::value() const& {
  if (!value_) fail_result_access(status_);
  return *value_;
}
template <typename T>
T& Result<T>::value() & {
  if (!value_) fail_result_access(status_);
  return *value_;
}
template <typename T>
T&& Result<T>::value() && {
  if (!value_) fail_result_access(status_);
  return std::move(*value_);
}

}  // namespace zinf

// Return early from a function returning Status or Result<U> when `expr` (a Status) is an error.
#define ZINF_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    ::zinf::Status zinf_status_ = (expr);           \
    if (!zinf_status_.is_ok()) return zinf_status_; \
  } while (false)

#define ZINF_CONCAT_INNER_(a, b) a##b
#define ZINF_CONCAT_(a, b) ZINF_CONCAT_INNER_(a, b)

// `ZINF_ASSIGN_OR_RETURN(auto x, make_x());` declares x from a Result or returns its Status.
#define ZINF_ASSIGN_OR_RETURN(decl, expr) ZINF_ASSIGN_OR_RETURN_IMPL_(ZINF_CONCAT_(zinf_result_, __LINE__), decl, expr)
#define ZINF_ASSIGN_OR_RETURN_IMPL_(tmp, decl, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.is_ok()) return tmp.status();             \
  decl = std::move(tmp).value()
