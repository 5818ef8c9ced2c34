// The loader's container section (loader_yaml.h): image, sizing, command and args, hooks,
// ports, env and mounts. The rules on their values are the validator's (validate.cpp).
#include "common/spec/loader_yaml.h"

#include "common/spec/quantity.h"
#include "common/spec/spec_schema.h"

#include <map>

namespace yard::spec::detail {

void Loader::loadContainer(const YAML::Node& node, const std::string& path,
                           schema::Container::Builder c) {
  auto m = mapping(node, path, specKeys("Container"));
  if (!m) return;
  if (const auto* n = m->get("image"); n && present(*n))
    if (auto v = scalar(*n, at(path, "image"))) c.setImage(*v);

  const YAML::Node* res = m->get("resources");
  const YAML::Node* flavor = m->get("flavor");
  bool hasRes = res && present(*res);
  bool hasFlavor = flavor && present(*flavor);
  if (hasRes && hasFlavor) {
    error(at(path, "flavor"), "give either resources or flavor, not both");
  } else if (hasFlavor) {
    if (auto v = scalar(*flavor, at(path, "flavor"))) c.getSizing().setFlavor(*v);
  } else if (hasRes) {
    std::string rpath = at(path, "resources");
    if (auto rm = mapping(*res, rpath, specKeys("Resources"))) {
      auto r = c.getSizing().initResources();
      const YAML::Node* cpu = rm->get("cpu");
      if (!cpu || !present(*cpu)) {
        error(at(rpath, "cpu"), "required: cores (like 4 or 0.5) or millicores (like 500m)");
      } else if (auto s = scalar(*cpu, at(rpath, "cpu"))) {
        auto v = parseCpuMillis(*s);
        if (v) r.setCpuMillis(v.value()); else error(at(rpath, "cpu"), v.error());
      }
      const YAML::Node* mem = rm->get("memory");
      if (!mem || !present(*mem)) {
        error(at(rpath, "memory"), "required: like 512Mi or 16Gi");
      } else if (auto s = scalar(*mem, at(rpath, "memory"))) {
        auto v = parseMemoryBytes(*s);
        if (v) r.setMemoryBytes(v.value()); else error(at(rpath, "memory"), v.error());
      }
      if (const auto* g = rm->get("gpu"); g && present(*g))
        if (auto v = integer(*g, at(rpath, "gpu"))) r.setGpu(*v);
    }
  }

  std::vector<std::string> argv;
  bool argvOk = true;
  for (const char* key : {"command", "args"}) {
    if (const auto* n = m->get(key); n && present(*n)) {
      if (auto w = words(*n, at(path, key))) argv.insert(argv.end(), w->begin(), w->end());
      else argvOk = false;
    }
  }
  if (argvOk) {
    auto list = c.initArgv(static_cast<unsigned>(argv.size()));
    for (size_t i = 0; i < argv.size(); ++i) list.set(static_cast<unsigned>(i), argv[i]);
  }
  if (const auto* n = m->get("postStart"); n && present(*n))
    loadHook(*n, at(path, "postStart"), c.initPostStart());
  if (const auto* n = m->get("preStop"); n && present(*n))
    loadHook(*n, at(path, "preStop"), c.initPreStop());
  if (const auto* n = m->get("ports"); n && present(*n)) loadPorts(*n, at(path, "ports"), c);
  if (const auto* n = m->get("env"); n && present(*n)) loadEnv(*n, at(path, "env"), c);
  if (const auto* n = m->get("mounts"); n && present(*n)) loadMounts(*n, at(path, "mounts"), c);
  if (const auto* n = m->get("workingDir"); n && present(*n))
    if (auto v = scalar(*n, at(path, "workingDir"))) c.setWorkingDir(*v);
  if (const auto* n = m->get("nodeSelector"); n && present(*n)) loadNodeSelector(*n, at(path, "nodeSelector"), c);
}

void Loader::loadNodeSelector(const YAML::Node& node, const std::string& path, schema::Container::Builder c) {
  visit();
  if (!node.IsMap()) {
    error(path, "must be a mapping of node label to value (like { rack: r1, disk: nvme }), got " + describe(node));
    return;
  }
  MapView view;
  std::set<std::string> seen;
  collect(node, path, view, seen, 0, false);
  std::map<std::string, std::string> sorted;  // the list is kept sorted by key
  for (const auto& [key, value] : view.entries_) {
    std::string v;
    if (present(value))
      if (auto s = scalar(value, at(path, key))) v = *s;
    sorted[key] = v;
  }
  auto list = c.initNodeSelector(static_cast<unsigned>(sorted.size()));
  unsigned i = 0;
  for (const auto& [key, value] : sorted) {
    list[i].setKey(key);
    list[i++].setValue(value);
  }
}

void Loader::loadHook(const YAML::Node& node, const std::string& path,
                      schema::Hook::Builder hook) {
  auto m = mapping(node, path, specKeys("Hook"));
  if (!m) return;
  const YAML::Node* exec = m->get("exec");
  if (!exec || !present(*exec)) {
    error(at(path, "exec"), "required: the hook's command, a string or a list");
    return;
  }
  if (auto w = words(*exec, at(path, "exec"))) {
    if (w->empty()) error(at(path, "exec"), "must not be empty");
    auto list = hook.initExec(static_cast<unsigned>(w->size()));
    for (size_t i = 0; i < w->size(); ++i) list.set(static_cast<unsigned>(i), (*w)[i]);
  }
}

void Loader::loadPorts(const YAML::Node& node, const std::string& path,
                       schema::Container::Builder c) {
  visit();
  if (!node.IsSequence()) {
    error(path, "must be a list of ports (like - { name: metrics, port: 9100 }), got " + describe(node));
    return;
  }
  auto ports = c.initPorts(static_cast<unsigned>(node.size()));
  for (size_t i = 0; i < node.size(); ++i) {
    std::string ppath = index(path, i);
    auto p = ports[static_cast<unsigned>(i)];
    auto m = mapping(node[i], ppath, specKeys("Port"));
    if (!m) continue;
    if (const auto* n = m->get("name"); n && present(*n))
      if (auto v = scalar(*n, at(ppath, "name"))) p.setName(*v);
    if (const auto* n = m->get("port"); n && present(*n)) {
      if (auto v = integer(*n, at(ppath, "port"))) p.setPort(*v);
    } else {
      error(at(ppath, "port"), "required: a number 1-65535");
    }
    if (const auto* n = m->get("protocol"); n && present(*n))
      if (auto v = enumeration<schema::Protocol>(
              *n, at(ppath, "protocol"), {{"TCP", schema::Protocol::TCP}, {"UDP", schema::Protocol::UDP}}))
        p.setProtocol(*v);
  }
}

void Loader::loadEnv(const YAML::Node& node, const std::string& path,
                     schema::Container::Builder c) {
  visit();
  if (node.IsMap()) {
    // The compact form: env: { EPOCHS: "90", LR: "0.1" }.
    MapView view;
    std::set<std::string> seen;
    collect(node, path, view, seen, 0, false);
    auto env = c.initEnv(static_cast<unsigned>(view.entries_.size()));
    unsigned i = 0;
    for (const auto& [name, value] : view.entries_) {
      auto e = env[i++];
      e.setName(name);
      if (present(value))
        if (auto v = scalar(value, at(path, name))) e.setValue(*v);
    }
    return;
  }
  if (!node.IsSequence()) {
    error(path, "must be a list of { name, value } (or a mapping of name to value), got " + describe(node));
    return;
  }
  auto env = c.initEnv(static_cast<unsigned>(node.size()));
  for (size_t i = 0; i < node.size(); ++i) {
    std::string epath = index(path, i);
    auto e = env[static_cast<unsigned>(i)];
    auto m = mapping(node[i], epath, specKeys("Env"));
    if (!m) continue;
    if (const auto* n = m->get("name"); n && present(*n))
      if (auto v = scalar(*n, at(epath, "name"))) e.setName(*v);
    if (const auto* n = m->get("value"); n && present(*n))
      if (auto v = scalar(*n, at(epath, "value"))) e.setValue(*v);
  }
}

void Loader::loadMounts(const YAML::Node& node, const std::string& path,
                        schema::Container::Builder c) {
  visit();
  if (!node.IsSequence()) {
    error(path, "must be a list of mounts (like - { dataset: imagenet, path: /data }), got " + describe(node));
    return;
  }
  auto mounts = c.initMounts(static_cast<unsigned>(node.size()));
  for (size_t i = 0; i < node.size(); ++i) {
    std::string mpath = index(path, i);
    auto mt = mounts[static_cast<unsigned>(i)];
    auto m = mapping(node[i], mpath, specKeys("Mount"));
    if (!m) continue;
    if (const auto* n = m->get("dataset"); n && present(*n))
      if (auto v = scalar(*n, at(mpath, "dataset"))) mt.setDataset(*v);
    if (const auto* n = m->get("path"); n && present(*n))
      if (auto v = scalar(*n, at(mpath, "path"))) mt.setPath(*v);
    if (const auto* n = m->get("readOnly"); n && present(*n))
      if (auto v = boolean(*n, at(mpath, "readOnly"))) mt.setReadOnly(*v);
  }
}

}  // namespace yard::spec::detail
