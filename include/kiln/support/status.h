// Status and Expected<T>: coded, located user errors that callers cannot silently drop.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace kiln {

// Stable error codes; every one is documented in docs/errors.md. Numbers never change meaning.
enum class ErrorCode : int {
  Ok = 0,
  // K1xxx: files and paths
  FileNotFound = 1001,
  FileUnreadable = 1002,
  FileWriteFailed = 1003,
  // K2xxx: ONNX model structure
  NotProtobuf = 2001,
  Truncated = 2002,
  EmptyGraph = 2003,
  UnknownDType = 2004,
  BadDim = 2005,
  DataSizeMismatch = 2006,
  SizeOverflow = 2007,
  DuplicateName = 2008,
  UndefinedInput = 2009,
  GraphCycle = 2010,
  ExternalDataEscape = 2011,
  ExternalDataRange = 2012,
  BadAttribute = 2013,
  NoGraph = 2014,
  BadArity = 2015,
  // K3xxx: IR invariants (verifier)
  VerifyFailed = 3001,
  ShapeConflict = 3002,
  // K4xxx: command line
  BadFlag = 4001,
  UnsupportedFormat = 4002,
  ShapeSpecSyntax = 4101,
  ShapeSpecUnknownInput = 4102,
  ShapeSpecRankMismatch = 4103,
  ShapeSpecDimMismatch = 4104,
  ShapeSpecBadDim = 4105,
  DynamicProfileInvalid = 4106,
  // K5xxx: execution
  RuntimeUnsupported = 5001,
  RuntimeBadInput = 5002,
  RuntimeMissingInput = 5003,
  RuntimeOutOfMemory = 5004,
  // K6xxx: conformance and comparison
  ConformanceDataBad = 6001,
  CompareNonFinite = 6002,
  // K42xx: precision configuration (keep-dtype lists, precision reports)
  PrecisionConfigInvalid = 4201,
  // K7xxx: MindSpore Lite .ms files, lowering, converter_lite and benchmark
  MsFileInvalid = 7001,
  MsReadUnsupported = 7002,
  MsLowerUnsupported = 7101,
  MsLowerBadAttribute = 7102,
  MsModelTooLarge = 7103,
  MsLowerDynamicShape = 7104,
  ConverterConfigInvalid = 7201,
  BenchmarkDataInvalid = 7301,
  BenchmarkAccuracyFailed = 7302,
  // K8xxx: Ascend .om files, lowering, atc and AIPP
  OmFileInvalid = 8001,
  OmReadUnsupported = 8002,
  OmLowerUnsupported = 8101,
  OmLowerBadAttribute = 8102,
  SocVersionUnknown = 8201,
  AtcOptionInvalid = 8202,
  AippConfigSyntax = 8301,
  AippConfigInvalid = 8302,
  // K9xxx: internal
  Internal = 9001,
};

// "K2002"-style code string for an error code.
std::string codeString(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message, std::string hint = {})
      : code_(code), message_(std::move(message)), hint_(std::move(hint)) {}

  static Status ok() { return {}; }
  bool isOk() const { return code_ == ErrorCode::Ok; }
  explicit operator bool() const { return isOk(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::string& hint() const { return hint_; }
  // The code the drop-in CLIs print for this error (ATC's "E10002", converter_lite's "-600"), if any.
  const std::string& peerCode() const { return peerCode_; }
  Status withPeerCode(std::string code) const {
    Status copy = *this;
    copy.peerCode_ = std::move(code);
    return copy;
  }
  // "K2002: <message>. Fix: <hint>" — the one line users see.
  std::string toString() const;
  // Prefixes context (a file name, a node) to the message.
  Status withContext(const std::string& context) const;

 private:
  ErrorCode code_ = ErrorCode::Ok;
  std::string message_;
  std::string hint_;
  std::string peerCode_;
};

template <typename... Args>
Status makeError(ErrorCode code, std::string hint, fmt::format_string<Args...> format,
                 Args&&... args) {
  return Status(code, fmt::format(format, std::forward<Args>(args)...), std::move(hint));
}

template <typename T> class [[nodiscard]] Expected {
 public:
  Expected(T value) : storage_(std::move(value)) {}
  Expected(Status status) : storage_(std::move(status)) {
    if (std::get<Status>(storage_).isOk()) std::abort(); // an Expected error must be an error
  }

  bool hasValue() const { return std::holds_alternative<T>(storage_); }
  explicit operator bool() const { return hasValue(); }
  T& operator*() { return std::get<T>(storage_); }
  const T& operator*() const { return std::get<T>(storage_); }
  T* operator->() { return &std::get<T>(storage_); }
  const T* operator->() const { return &std::get<T>(storage_); }
  const Status& status() const { return std::get<Status>(storage_); }
  T take() { return std::move(std::get<T>(storage_)); }

 private:
  std::variant<T, Status> storage_;
};

[[noreturn]] void checkFailed(const char* file, int line, const char* expr,
                              const std::string& message);

} // namespace kiln

// Internal invariant: aborts with a message. Never used for user input.
#define KILN_CHECK(cond, ...)                                                                      \
  do {                                                                                             \
    if (!(cond)) ::kiln::checkFailed(__FILE__, __LINE__, #cond, fmt::format("" __VA_ARGS__));      \
  } while (0)

#define KILN_TRY(expr)                                                                             \
  do {                                                                                             \
    ::kiln::Status kilnStatus_ = (expr);                                                           \
    if (!kilnStatus_.isOk()) return kilnStatus_;                                                   \
  } while (0)

#define KILN_CONCAT_INNER(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT_INNER(a, b)
#define KILN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                                                 \
  auto tmp = (expr);                                                                               \
  if (!tmp) return tmp.status();                                                                   \
  lhs = tmp.take()
// KILN_ASSIGN_OR_RETURN(auto x, f()); — unwraps an Expected or returns its error.
#define KILN_ASSIGN_OR_RETURN(lhs, expr)                                                           \
  KILN_ASSIGN_OR_RETURN_IMPL(KILN_CONCAT(kilnExpected_, __LINE__), lhs, expr)
