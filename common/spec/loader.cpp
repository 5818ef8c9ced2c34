// loadJobSpec: the YAML parse and its limits, the reader (loader_yaml.h and the section
// files it lists), then the validator; and the limits on a normalised spec.
#include "common/spec/loader.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>
#include <capnp/dynamic.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "common/spec/loader_yaml.h"
#include "common/spec/validate.h"

namespace yard::spec {

LoadedJob::LoadedJob() : message_(std::make_unique<capnp::MallocMessageBuilder>()) {
  message_->initRoot<schema::Job>();
}
LoadedJob::LoadedJob(LoadedJob&&) noexcept = default;
LoadedJob& LoadedJob::operator=(LoadedJob&&) noexcept = default;
LoadedJob::~LoadedJob() = default;
schema::Job::Reader LoadedJob::job() const { return message_->getRoot<schema::Job>().asReader(); }
schema::Job::Builder LoadedJob::jobBuilder() { return message_->getRoot<schema::Job>(); }

namespace {

// Counts document starts; `stuck` when a document starts where the previous one did.
class DocumentCounter : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (documents > 0 && mark.pos == lastPos_) {
      stuck = true;
      stuckAt = mark;
    }
    lastPos_ = mark.pos;
    ++documents;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  int documents = 0;
  bool stuck = false;
  YAML::Mark stuckAt;

 private:
  int lastPos_ = -1;
};

// True when `path` is `prefix` or lies under it (`prefix.x`, `prefix[0]`).
bool under(const std::string& path, const std::string& prefix) {
  if (prefix.empty()) return true;
  if (path.compare(0, prefix.size(), prefix) != 0) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '.' || path[prefix.size()] == '[';
}

}  // namespace

LoadedJob loadJobSpec(std::string_view yaml) {
  LoadedJob out;
  if (yaml.size() > kMaxSpecBytes) {
    out.errors.push_back({"", "spec is " + std::to_string(yaml.size()) +
                                  " bytes, more than the limit of 1 MiB (" +
                                  std::to_string(kMaxSpecBytes) + " bytes)"});
    return out;
  }
  std::vector<YAML::Node> docs;
  try {
    // Count documents with the event parser first: yaml-cpp 0.7's LoadAll loops forever on
    // a stray ',' where a node should start (jbeder/yaml-cpp#1040), emitting null documents
    // at the same position; two documents starting at one position mean exactly that.
    std::istringstream in{std::string(yaml)};
    YAML::Parser parser(in);
    DocumentCounter counter;
    for (int i = 0; i < 3 && !counter.stuck && parser.HandleNextDocument(counter); ++i) {
    }
    if (counter.stuck) {
      out.errors.push_back({"", "malformed YAML at line " + std::to_string(counter.stuckAt.line + 1) +
                                    ", column " + std::to_string(counter.stuckAt.column + 1) +
                                    ": unexpected character where a value should start"});
      return out;
    }
    if (counter.documents > 1) {
      out.errors.push_back({"", "the file holds more than one YAML document; a job spec is exactly one"});
      return out;
    }
    docs.push_back(YAML::Load(std::string(yaml)));
  } catch (const YAML::DeepRecursion& e) {
    out.errors.push_back({"", "malformed YAML: values are nested too deeply (yaml-cpp allows " +
                                  std::to_string(e.depth()) + " levels)"});
    return out;
  } catch (const YAML::Exception& e) {
    std::string msg = e.msg.empty() ? "malformed YAML" : e.msg;
    if (e.mark.is_null())
      out.errors.push_back({"", "malformed YAML: " + msg});
    else
      out.errors.push_back({"", "malformed YAML at line " + std::to_string(e.mark.line + 1) +
                                    ", column " + std::to_string(e.mark.column + 1) + ": " + msg});
    return out;
  }
  if (docs.empty() || (docs.size() == 1 && docs[0].IsNull())) {
    out.errors.push_back({"", "the spec is empty: expected a mapping with name and tasks"});
    return out;
  }
  SpecErrors loadErrors;
  bool truncated = false;
  try {
    detail::Loader loader(loadErrors);
    loader.loadJob(docs[0], out.jobBuilder());
    truncated = loader.truncated();
  } catch (const detail::BudgetExceeded& b) {
    out.errors.push_back({"", b.bytes ? "spec is too large: more than " + std::to_string(kMaxSpecExpandedBytes >> 20) +
                                            " MiB of text once aliases are expanded"
                                      : "spec is too large: more than " + std::to_string(kMaxSpecValues) +
                                            " values once aliases are expanded"});
    return out;
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws on some malformed node accesses; name it rather than crash.
    out.errors.push_back({"", "malformed YAML: " + e.msg});
    return out;
  }
  // Rule errors at or under a path the loader already complained about would repeat it.
  SpecErrors ruleErrors = validateJob(out.job());
  out.errors = std::move(loadErrors);
  size_t shapeCount = out.errors.size();
  for (auto& e : ruleErrors) {
    bool repeated = false;
    for (size_t i = 0; i < shapeCount && !repeated; ++i)
      repeated = !out.errors[i].path.empty() && under(e.path, out.errors[i].path);
    if (!repeated) out.errors.push_back(std::move(e));
  }
  for (auto& e : checkSpecLimits(out.job())) out.errors.push_back(std::move(e));
  if (truncated || out.errors.size() > kMaxSpecErrors) {
    out.errors.resize(std::min(out.errors.size(), kMaxSpecErrors));
    out.errors.push_back({"", "more errors were found; only the first " + std::to_string(kMaxSpecErrors) + " are shown"});
  }
  return out;
}

LoadedJob loadJobSpecFile(const std::string& path) {
  LoadedJob out;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    out.errors.push_back({"", "cannot read " + path});
    return out;
  }
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxSpecBytes) {
      out.errors.push_back({"", path + " is larger than the limit of 1 MiB (" +
                                    std::to_string(kMaxSpecBytes) + " bytes)"});
      return out;
    }
  }
  if (in.bad()) {
    out.errors.push_back({"", "cannot read " + path});
    return out;
  }
  return loadJobSpec(text);
}

namespace {

// Every text under `v`, by field path; a NUL in one is an error (the first per text).
void findNul(capnp::DynamicValue::Reader v, const std::string& path, SpecErrors& out) {
  if (out.size() >= kMaxSpecErrors) return;
  switch (v.getType()) {
    case capnp::DynamicValue::TEXT: {
      auto t = v.as<capnp::Text>();
      for (size_t i = 0; i < t.size(); ++i)
        if (t[i] == '\0') {
          out.push_back({path, "must not contain a NUL character (found at byte " + std::to_string(i) + ")"});
          return;
        }
      return;
    }
    case capnp::DynamicValue::LIST: {
      auto list = v.as<capnp::DynamicList>();
      for (unsigned i = 0; i < list.size(); ++i) findNul(list[i], path + "[" + std::to_string(i) + "]", out);
      return;
    }
    case capnp::DynamicValue::STRUCT: {
      auto s = v.as<capnp::DynamicStruct>();
      for (auto field : s.getSchema().getFields()) {
        if (!s.has(field)) continue;  // unset, or a union member not chosen
        std::string name = field.getProto().getName();
        findNul(s.get(field), path.empty() ? name : path + "." + name, out);
      }
      return;
    }
    default: return;
  }
}

}  // namespace

size_t normalisedSpecBytes(schema::Job::Reader job) {
  return (job.totalSize().wordCount + 2) * sizeof(capnp::word);
}

SpecErrors checkSpecLimits(schema::Job::Reader job) {
  SpecErrors out;
  size_t bytes = normalisedSpecBytes(job);
  if (bytes > kMaxNormalisedSpecBytes) {
    // Too large to be worth walking: one error, the size and the limit.
    out.push_back({"", "spec is " + std::to_string(bytes) + " bytes once normalised, more than the limit of " +
                           std::to_string(kMaxNormalisedSpecBytes >> 20) + " MiB (" +
                           std::to_string(kMaxNormalisedSpecBytes) + " bytes)"});
    return out;
  }
  findNul(capnp::toDynamic(job), "", out);
  return out;
}

}  // namespace yard::spec
