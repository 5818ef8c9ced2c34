#pragma once
// The framework kinds (one .cpp each); only framework.cpp's registry names them.

#include "master/frameworks/framework.h"

namespace yard::master::frameworks {

class PyTorch final : public Framework {
 public:
  std::optional<std::string> succeeded(schema::Task::Reader spec, const TaskEntry& task,
                                       const std::vector<const store::ReplicaRecord*>& attempt) const override;
  void addEnv(const GangWiring& gang, std::vector<Env>& envs) const override;
};

class TensorFlow final : public Framework {
 public:
  std::optional<std::string> succeeded(schema::Task::Reader spec, const TaskEntry& task,
                                       const std::vector<const store::ReplicaRecord*>& attempt) const override;
  void addEnv(const GangWiring& gang, std::vector<Env>& envs) const override;
};

class Paddle final : public Framework {
 public:
  std::optional<std::string> succeeded(schema::Task::Reader spec, const TaskEntry& task,
                                       const std::vector<const store::ReplicaRecord*>& attempt) const override;
  void addEnv(const GangWiring& gang, std::vector<Env>& envs) const override;
};

class OpenMpi final : public Framework {
 public:
  std::optional<std::string> succeeded(schema::Task::Reader spec, const TaskEntry& task,
                                       const std::vector<const store::ReplicaRecord*>& attempt) const override;
  void addEnv(const GangWiring& gang, std::vector<Env>& envs) const override;
  bool mayStart(const TaskEntry& task, const store::ReplicaRecord& replica) const override;
  std::vector<std::pair<std::string, std::string>> files(schema::Task::Reader spec,
                                                         const store::ReplicaRecord& replica) const override;
};

class ContainerJob final : public Framework {
 public:
  std::optional<std::string> succeeded(schema::Task::Reader spec, const TaskEntry& task,
                                       const std::vector<const store::ReplicaRecord*>& attempt) const override;
  std::vector<GangSlot> gang(schema::Task::Reader spec) const override;
  void addEnv(const GangWiring&, std::vector<Env>&) const override {}
};

}  // namespace yard::master::frameworks
