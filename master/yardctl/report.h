#pragma once
// How every yardctl command reports its outcome, in one place (docs/yardctl.md, "yardctl
// output"):
//  - without -o json: results as text on stdout, an error as "yardctl: <message>" on stderr;
//  - with -o json: stdout carries JSON only: one document per command (indented), or one
//    object per line (JSON Lines) for a stream (logs, job events -f, job list --watch). An
//    error is the object {"error": {"message": ..., "path": ...}} ("path" only when the error
//    is about a field of a job spec) printed there in place of the result, on stdout, with
//    the exit code unchanged, so `yardctl -o json ... | jq` always reads JSON.
// An invalid job spec (job submit) also lists every problem:
//   {"error": {first}, "errors": [{"path", "message"}, ...], "file": FILE}.

#include <optional>
#include <string>
#include <vector>

#include "common/spec/spec_error.h"
#include "common/util/json.h"
#include "master/yardctl/cli.h"

namespace yard::ctl {

// One document, or JSON Lines.
enum class JsonStyle { kDocument, kLine };

inline bool jsonOutput(const GlobalOptions& global) { return global.output == "json"; }

// Prints `value` on stdout: indented (kDocument) or on one line, flushed (kLine).
void printJson(Streams io, const Json& value, JsonStyle style = JsonStyle::kDocument);

// {"message": ..., "path": ...}; "path" is left out when empty.
Json errorJson(const std::string& message, const std::string& path = "");

// Reports `message` the one way (see above) and returns `exitCode` (kExitFailed or
// kExitUsage), so a command ends with `return reportError(...)`.
int reportError(const GlobalOptions& global, Streams io, int exitCode, const std::string& message,
                JsonStyle style = JsonStyle::kDocument);

// An error about a field of a job spec: the field's path and what is wrong with it.
// Text: "yardctl: <path>: <message>".
int reportFieldError(const GlobalOptions& global, Streams io, int exitCode, const spec::SpecError& error);

// A spec file that did not load or validate: text "INVALID FILE" and one line per error on
// stderr; JSON as in the header comment. Returns kExitFailed.
int reportInvalidSpec(const GlobalOptions& global, Streams io, const std::string& file, const spec::SpecErrors& errors);

// `validate` and `job submit`: the first of `files` that is not a regular file is a usage
// error ("FILE: no such file", kExitUsage), reported here; nullopt when every one is.
std::optional<int> reportMissingFile(const GlobalOptions& global, Streams io, const std::vector<std::string>& files);

// The JSON of an invalid spec file, shared by reportInvalidSpec and `validate -o json`.
Json invalidSpecJson(const std::string& file, const spec::SpecErrors& errors);

// Splits a master's refusal of a spec ("tasks[0].roles.master.container.mounts[0].dataset:
// dataset imagenet does not exist") into its field path and message; a refusal that names no
// field ("queue team-z does not exist") comes back with an empty path, the message whole.
spec::SpecError splitFieldPath(const std::string& message);

// True when argv asks for -o json (-o json, -ojson, --output json, --output=json), read
// before CLI11 parses it, so that a usage error is reported in JSON too.
bool argvWantsJson(int argc, const char* const* argv);

}  // namespace yard::ctl
