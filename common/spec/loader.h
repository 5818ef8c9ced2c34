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
// The normalised spec (the Cap'n Proto message yardctl sends and the master stores) is at
// most this large. A spec file within kMaxSpecBytes stays within it unless aliases or very
// short list items blow it up (it is about 1.1x the YAML for real specs).
inline constexpr size_t kMaxNormalisedSpecBytes = 2u << 20;  // 2 MiB
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

// The limits on a normalised spec that hold wherever it comes from: the loader applies
// them to what it built, the master to what arrived over the wire (which no loader has
// seen): at most kMaxNormalisedSpecBytes, and no NUL character in any text (the loader
// refuses one in the YAML; a peer writing capnp directly could send one).
SpecErrors checkSpecLimits(schema::Job::Reader job);
// The bytes of `job` as one flat message (its words reachable from the root, the root
// pointer and a one-segment table), as the master stores it.
size_t normalisedSpecBytes(schema::Job::Reader job);

}  // namespace yard::spec
