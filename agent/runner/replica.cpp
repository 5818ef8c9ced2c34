#include "agent/runner/replica.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "agent/shim/files.h"
#include "common/util/capnp_text.h"

namespace yard::agent {
namespace {


std::vector<std::string> strings(capnp::List<capnp::Text>::Reader in) {
  std::vector<std::string> out;
  for (auto s : in) out.push_back(str(s));
  return out;
}

void setStrings(capnp::List<capnp::Text>::Builder out, const std::vector<std::string>& in) {
  for (unsigned i = 0; i < in.size(); ++i) out.set(i, in[i]);
}

}  // namespace

std::string replicaWorkDir(const ReplicaSpec& spec, const std::string& dir) {
  return spec.image == "host" && spec.runAsUid >= 0 ? dir + "/" + kOwnedWorkDir : dir;
}

ReplicaSpec specFrom(agentapi::ReplicaSpec::Reader in) {
  ReplicaSpec s;
  s.job = str(in.getJob());
  s.task = str(in.getTask());
  s.role = str(in.getRole());
  s.index = in.getIndex();
  s.image = str(in.getImage());
  s.argv = strings(in.getArgv());
  for (auto e : in.getEnv()) s.env.emplace_back(str(e.getName()), str(e.getValue()));
  s.cpuMillis = in.getResources().getCpuMillis();
  s.memoryBytes = in.getResources().getMemoryBytes();
  s.gpu = in.getResources().getGpu();
  s.gpus = str(in.getGpus());
  for (auto m : in.getMounts()) s.mounts.push_back({str(m.getHostPath()), str(m.getPath()), m.getReadOnly()});
  s.postStart = strings(in.getPostStart());
  s.preStop = strings(in.getPreStop());
  s.workingDir = str(in.getWorkingDir());
  s.vm = in.getVm();
  s.stopGraceMs = in.getStopGraceMs();
  s.runAsUid = in.getRunAsUid();
  s.runAsGid = in.getRunAsGid();
  s.owner = str(in.getOwner());
  s.cpus = str(in.getCpus());
  s.mems = str(in.getMems());
  for (auto f : in.getFiles()) s.files.emplace_back(str(f.getName()), str(f.getContent()));
  return s;
}

void specTo(const ReplicaSpec& s, agentapi::ReplicaSpec::Builder out) {
  out.setJob(s.job);
  out.setTask(s.task);
  out.setRole(s.role);
  out.setIndex(s.index);
  out.setImage(s.image);
  setStrings(out.initArgv(static_cast<unsigned>(s.argv.size())), s.argv);
  auto env = out.initEnv(static_cast<unsigned>(s.env.size()));
  for (unsigned i = 0; i < env.size(); ++i) {
    env[i].setName(s.env[i].first);
    env[i].setValue(s.env[i].second);
  }
  auto res = out.initResources();
  res.setCpuMillis(s.cpuMillis);
  res.setMemoryBytes(s.memoryBytes);
  res.setGpu(s.gpu);
  out.setGpus(s.gpus);
  auto mounts = out.initMounts(static_cast<unsigned>(s.mounts.size()));
  for (unsigned i = 0; i < mounts.size(); ++i) {
    mounts[i].setHostPath(s.mounts[i].hostPath);
    mounts[i].setPath(s.mounts[i].path);
    mounts[i].setReadOnly(s.mounts[i].readOnly);
  }
  setStrings(out.initPostStart(static_cast<unsigned>(s.postStart.size())), s.postStart);
  setStrings(out.initPreStop(static_cast<unsigned>(s.preStop.size())), s.preStop);
  out.setWorkingDir(s.workingDir);
  out.setVm(s.vm);
  out.setStopGraceMs(s.stopGraceMs);
  out.setRunAsUid(s.runAsUid);
  out.setRunAsGid(s.runAsGid);
  out.setOwner(s.owner);
  out.setCpus(s.cpus);
  out.setMems(s.mems);
  auto files = out.initFiles(static_cast<unsigned>(s.files.size()));
  for (unsigned i = 0; i < files.size(); ++i) {
    files[i].setName(s.files[i].first);
    files[i].setContent(s.files[i].second);
  }
}

std::string encodeSpec(const ReplicaSpec& spec) {
  capnp::MallocMessageBuilder msg;
  specTo(spec, msg.initRoot<agentapi::ReplicaSpec>());
  auto words = capnp::messageToFlatArray(msg);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

Result<ReplicaSpec> decodeSpec(const std::string& bytes) {
  using R = Result<ReplicaSpec>;
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) return R::fail("spec file is truncated");
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  try {
    capnp::FlatArrayMessageReader reader(words);
    return R::ok(specFrom(reader.getRoot<agentapi::ReplicaSpec>()));
  } catch (const kj::Exception& e) {
    return R::fail(std::string("spec file is not readable: ") + e.getDescription().cStr());
  }
}

Result<bool> writeFileAtomic(const std::string& path, const std::string& data, mode_t mode) {
  if (int err = shim::writeFileAtomically(path, data, mode); err != 0)
    return Result<bool>::fail("cannot write " + path + ": " + std::strerror(err));
  return Result<bool>::ok(true);
}

Result<std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Result<std::string>::fail("cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  return Result<std::string>::ok(s.str());
}

}  // namespace yard::agent
