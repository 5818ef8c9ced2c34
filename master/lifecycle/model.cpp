#include "master/lifecycle/model.h"

#include <cstring>

namespace yard::master {

JobSpec::JobSpec(const std::string& bytes) : words_(kj::heapArray<capnp::word>((bytes.size() + 7) / 8)) {
  std::memcpy(words_.begin(), bytes.data(), bytes.size());
  capnp::ReaderOptions options;
  options.traversalLimitInWords = kj::maxValue;  // our own bytes, read for the job's whole life (model.h)
  reader_ = std::make_unique<capnp::FlatArrayMessageReader>(words_.asPtr(), options);
  job_ = reader_->getRoot<schema::Job>();
  tasks_ = job_.getTasks();
}

void JobSpec::verify() const { (void)job_.totalSize(); }

schema::Container::Reader containerOf(schema::Task::Reader t, const std::string& role) {
  if (t.getKind() == schema::TaskKind::CONTAINER_JOB) return t.getContainerJob().getContainer();
  for (auto r : t.getRoles())
    if (r.getName() == role) return r.getContainer();
  return t.getRoles()[0].getContainer();  // unreachable for validated specs
}

std::string replicaName(const store::ReplicaRecord& r) { return r.role + "/" + std::to_string(r.index); }

std::string specBytes(schema::Job::Reader spec) {
  capnp::MallocMessageBuilder copy;
  copy.setRoot(spec);
  auto flat = capnp::messageToFlatArray(copy);
  auto bytes = flat.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

}  // namespace yard::master
