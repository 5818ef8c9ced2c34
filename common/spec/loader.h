#pragma once
// The job spec loader: YAML text -> schema::Job (capnp), normalised (quantities in base
// units, durations in seconds, command + args joined, defaults applied), then validated.
//
// Two layers, both reporting every problem they find as `<path>: <message>`:
//  - the loader checks the *shape*: YAML syntax (with line and column), node types,
//    unknown and duplicate keys, the syntax of quantities, durations and enums, limits on
//    size (1 MiB) and on alias expansion;
//  - the validator (validate.h) checks the *rules* on the capnp message, so the master
//    runs the same checks on a submission that arrives over the wire.
// The loader never throws and never crashes on any input (the fuzz corpus guards this).

#include <capnp/message.h>

#include <memory>
#include <string>
#include <string_view>

#include "common/spec/spec_error.h"
#include "schema/job.capnp.h"

namespace yard::spec {

inline constexpr size_t kMaxSpecBytes = 1 << 20;  // 1 MiB
// Values visited while loading, aliases expanded; bounds the work an alias bomb can cause.
inline constexpr size_t kMaxSpecValues = 1'000'000;
// Scalar text visited with aliases expanded (an aliased 200 KB command used 500 times).
inline constexpr size_t kMaxSpecExpandedBytes = 16u << 20;
// Errors reported per spec (rules and shape each); a note says when more were found.
inline constexpr size_t kMaxSpecErrors = 100;

class LoadedJob {
 public:
  LoadedJob();
  LoadedJob(LoadedJob&&) noexcept;
  LoadedJob& operator=(LoadedJob&&) noexcept;
  ~LoadedJob();

  bool ok() const { return errors.empty(); }
  // The normalised job. Meaningful only when ok(); partially filled otherwise.
  schema::Job::Reader job() const;
  schema::Job::Builder jobBuilder();
  capnp::MessageBuilder& message() { return *message_; }

  SpecErrors errors;

 private:
  std::unique_ptr<capnp::MallocMessageBuilder> message_;
};

// Loads and validates a spec given as text.
LoadedJob loadJobSpec(std::string_view yaml);

// Reads `path` (refusing files over kMaxSpecBytes) and loads it. A file that cannot be
// read is one error with an empty path.
LoadedJob loadJobSpecFile(const std::string& path);

}  // namespace yard::spec
