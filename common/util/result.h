#pragma once
// A value or an error message written for the person at the terminal.
// Business logic returns these instead of throwing (docs/conventions.md, "Errors").

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace yard {

template <typename T>
class Result {
 public:
  static Result ok(T value) { return Result(std::move(value), {}); }
  static Result fail(std::string error) { return Result(std::nullopt, std::move(error)); }

  bool isOk() const { return value_.has_value(); }
  explicit operator bool() const { return isOk(); }

  // REQUIRES: isOk().
  const T& value() const& { assert(value_); return *value_; }
  T&& value() && { assert(value_); return std::move(*value_); }
  // REQUIRES: !isOk().
  const std::string& error() const { return error_; }

 private:
  Result(std::optional<T> value, std::string error)
      : value_(std::move(value)), error_(std::move(error)) {}
  std::optional<T> value_;
  std::string error_;
};

}  // namespace yard
