#include "master/yardctl/report.h"

#include <cctype>
#include <filesystem>
#include <ostream>
#include <string_view>

namespace yard::ctl {
namespace {

bool nameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool nameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

// True for a spec field path: name, then any of .name and [digits] ("tasks[0].roles.worker").
bool isFieldPath(std::string_view p) {
  size_t i = 0;
  auto name = [&] {
    if (i >= p.size() || !nameStart(p[i])) return false;
    while (i < p.size() && nameChar(p[i])) ++i;
    return true;
  };
  if (!name()) return false;
  while (i < p.size()) {
    if (p[i] == '.') {
      ++i;
      if (!name()) return false;
    } else if (p[i] == '[') {
      size_t digits = ++i;
      while (i < p.size() && std::isdigit(static_cast<unsigned char>(p[i]))) ++i;
      if (i == digits || i >= p.size() || p[i] != ']') return false;
      ++i;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

void printJson(Streams io, const Json& value, JsonStyle style) {
  if (style == JsonStyle::kLine) {
    io.out << jsonLine(value) << "\n";
    io.out.flush();
  } else {
    io.out << jsonText(value) << "\n";
  }
}

Json errorJson(const std::string& message, const std::string& path) {
  Json e = {{"message", message}};
  if (!path.empty()) e["path"] = path;
  return e;
}

int reportError(const GlobalOptions& global, Streams io, int exitCode, const std::string& message, JsonStyle style) {
  if (jsonOutput(global)) printJson(io, {{"error", errorJson(message)}}, style);
  else io.err << "yardctl: " << message << "\n";
  return exitCode;
}

int reportFieldError(const GlobalOptions& global, Streams io, int exitCode, const spec::SpecError& error) {
  if (jsonOutput(global)) printJson(io, {{"error", errorJson(error.message, error.path)}});
  else io.err << "yardctl: " << error.str() << "\n";
  return exitCode;
}

std::optional<int> reportMissingFile(const GlobalOptions& global, Streams io, const std::vector<std::string>& files) {
  for (const std::string& f : files) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(f, ec)) continue;
    auto st = std::filesystem::status(f, ec);
    std::string why = !std::filesystem::exists(st)       ? "no such file"
                      : std::filesystem::is_directory(st) ? "is a directory, not a spec file"
                                                          : "is not a regular file (a spec is read from a file)";
    return reportError(global, io, kExitUsage, f + ": " + why);
  }
  return std::nullopt;
}

Json invalidSpecJson(const std::string& file, const spec::SpecErrors& errors) {
  Json all = Json::array();
  for (const auto& e : errors) {
    Json one = Json::object();
    if (!e.path.empty()) one["path"] = e.path;  // a whole-file error (unreadable YAML) has none
    one["message"] = e.message;
    all.push_back(std::move(one));
  }
  Json first = errors.empty() ? errorJson(file + ": invalid") : errorJson(errors.front().message, errors.front().path);
  return {{"error", std::move(first)}, {"errors", std::move(all)}, {"file", file}};
}

int reportInvalidSpec(const GlobalOptions& global, Streams io, const std::string& file, const spec::SpecErrors& errors) {
  if (jsonOutput(global)) {
    printJson(io, invalidSpecJson(file, errors));
  } else {
    io.err << "INVALID " << file << "\n";
    for (const auto& e : errors) io.err << "  " << e.str() << "\n";
  }
  return kExitFailed;
}

spec::SpecError splitFieldPath(const std::string& message) {
  size_t colon = message.find(": ");
  if (colon != std::string::npos && isFieldPath(std::string_view(message).substr(0, colon)))
    return {message.substr(0, colon), message.substr(colon + 2)};
  return {"", message};
}

bool argvWantsJson(int argc, const char* const* argv) {
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") break;
    if ((a == "-o" || a == "--output") && i + 1 < argc) json = std::string_view(argv[++i]) == "json";
    else if (a.starts_with("-o") && a.size() > 2 && a[2] != '-') json = a.substr(2) == "json" || a.substr(2) == "=json";
    else if (a.starts_with("--output=")) json = a.substr(9) == "json";
  }
  return json;
}

}  // namespace yard::ctl
