// pm::Status and pm::Result<T>: errors as values.
//
// Thread safety: a Status or Result is a value; distinct objects may be used
// from different threads, one object needs external synchronisation.
#ifndef PM_STATUS_H_
#define PM_STATUS_H_

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace pm {

// Frozen: values reach the C API (pm_errcode) and CLI exit paths.
enum class Code : int {
  kOk = 0,
  kNotFound = 1,
  kInvalidArgument = 2,
  kCorruption = 3,
  kIOError = 4,
  kBusy = 5,
  kNoSpace = 6,
  kNotSupported = 7,
  kReadOnly = 8,  // needs write access: the file, or the way it was opened, is read-only
};

// A code plus a message that says what failed, where, and what to do.
// Success carries no message and costs one int.
class [[nodiscard]] Status {
 public:
  Status() = default;

  static Status ok_status() { return Status(); }
  static Status not_found(std::string msg) { return {Code::kNotFound, std::move(msg)}; }
  static Status invalid_argument(std::string msg) {
    return {Code::kInvalidArgument, std::move(msg)};
  }
  static Status corruption(std::string msg) { return {Code::kCorruption, std::move(msg)}; }
  static Status io_error(std::string msg) { return {Code::kIOError, std::move(msg)}; }
  // io_error with strerror(err) appended: "what: strerror".
  static Status from_errno(std::string what, int err);
  static Status busy(std::string msg) { return {Code::kBusy, std::move(msg)}; }
  static Status no_space(std::string msg) { return {Code::kNoSpace, std::move(msg)}; }
  static Status not_supported(std::string msg) { return {Code::kNotSupported, std::move(msg)}; }
  static Status read_only(std::string msg) { return {Code::kReadOnly, std::move(msg)}; }
  // A status of any code (one carried across a process boundary); kOk and
  // unknown codes give kIOError.
  static Status of(Code code, std::string msg) {
    const bool known = code > Code::kOk && code <= Code::kReadOnly;
    return {known ? code : Code::kIOError, std::move(msg)};
  }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return msg_; }
  bool is_not_found() const { return code_ == Code::kNotFound; }
  bool is_corruption() const { return code_ == Code::kCorruption; }
  bool is_busy() const { return code_ == Code::kBusy; }
  bool is_read_only() const { return code_ == Code::kReadOnly; }

  // "Corruption: <message>", or "OK".
  std::string to_string() const;

  // Prefixes the message with context ("open data/a.pm: ...") and keeps the code.
  Status with_context(std::string_view context) const;

 private:
  Status(Code code, std::string msg) : code_(code), msg_(std::move(msg)) {}

  Code code_ = Code::kOk;
  std::string msg_;
};

// A value or a non-OK Status, in std::expected's shape so that C++23 is a rename.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status s) : v_(std::move(s)) {      // NOLINT: implicit by design
    assert(!std::get<Status>(v_).ok() && "Result needs a value or an error");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // OK when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace pm

// Returns the Status of `expr` from the enclosing function when it is not OK.
#define PM_TRY(expr)                       \
  do {                                     \
    ::pm::Status pm_try_s_ = (expr);       \
    if (!pm_try_s_.ok()) return pm_try_s_; \
  } while (0)

#endif  // PM_STATUS_H_
