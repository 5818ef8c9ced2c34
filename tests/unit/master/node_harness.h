#pragma once
// Shared by the node registry and agent API tests: a real Store in a temp dir, a real
// io_context, a fake clock, and a NodeRegistry over them.

#include <catch2/catch.hpp>

#include <asio.hpp>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "master/nodes/nodes.h"

namespace yard::test {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "yard-nodes-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A registration that passes every rule; tests break one field at a time.
inline master::NodeRegistration goodNode(const std::string& name = "gpu-01") {
  master::NodeRegistration r;
  r.record.name = name;
  r.record.address = "10.0.0.1";
  r.record.cpuMillis = 64000;
  r.record.memoryBytes = int64_t{512} << 30;
  r.record.gpu = 2;
  r.record.portLo = 20000;
  r.record.portHi = 29999;
  r.record.agentVersion = "0.1.0";
  r.gpus = {{1, "GPU-" + name + "-1", "H100", 80ull << 30}, {0, "GPU-" + name + "-0", "H100", 80ull << 30}};
  r.labels = {{"zone", "a"}, {"yard.dev/rack", "r12"}};
  r.drivers = {"host", "containerd"};
  return r;
}

class NodeHarness {
 public:
  static constexpr int64_t kStart = 1'700'000'000'000;  // fake unix ms

  explicit NodeHarness(int64_t timeoutSeconds = 30) : timeoutSeconds_(timeoutSeconds) { open(); }
  ~NodeHarness() { close(); }

  // Destroys the registry and the store (which commits what is queued), then opens both
  // again from the file and loads, like a master restart.
  void reopen() {
    settle();
    close();
    open();
  }

  // Runs until every queued store write has completed and every completion it posted has
  // run on this (the io) thread, including changes those completions queued in turn.
  void settle() {
    for (;;) {
      REQUIRE(db->writeSync([](store::Tx&) {}));
      io.restart();
      if (io.poll() == 0) return;
    }
  }

  // Calls `op` with a reply that records the result, settles, returns the result.
  Result<bool> call(const std::function<void(master::NodeRegistry::Reply)>& op) {
    std::optional<Result<bool>> out;
    op([&out](Result<bool> r) { out = r; });
    settle();
    REQUIRE(out.has_value());
    return *out;
  }

  Result<bool> registerNode(master::NodeRegistration r) {
    return call([&](auto reply) { reg->registerNode(std::move(r), reply); });
  }
  Result<bool> heartbeat(const std::string& name) {
    return call([&](auto reply) { reg->heartbeat(name, reply); });
  }
  Result<bool> drain(const std::string& name) { return call([&](auto reply) { reg->drain(name, reply); }); }
  Result<bool> undrain(const std::string& name) { return call([&](auto reply) { reg->undrain(name, reply); }); }
  Result<bool> label(const std::string& name, std::vector<spec::LabelArg> changes) {
    return call([&](auto reply) { reg->label(name, std::move(changes), reply); });
  }

  const master::NodeInfo& node(const std::string& name) {
    auto it = reg->nodes().find(name);
    REQUIRE(it != reg->nodes().end());
    return it->second;
  }
  // The node's row as the store has it now.
  store::NodeRecord stored(const std::string& name) {
    auto state = db->loadAll();
    REQUIRE(state);
    for (const auto& n : state.value().nodes)
      if (n.name == name) return n;
    FAIL("node " << name << " is not in the store");
    return {};
  }
  size_t storedCount() {
    auto state = db->loadAll();
    REQUIRE(state);
    return state.value().nodes.size();
  }

  TempDir dir;
  asio::io_context io;
  std::atomic<int64_t> now{kStart};
  std::unique_ptr<store::Store> db;
  std::unique_ptr<master::NodeRegistry> reg;
  std::vector<std::string> logs;  // io thread only
  int changes = 0;                // onChange calls; io thread only

 private:
  void open() {
    auto opened = store::Store::open(dir.path() + "/state.db");
    REQUIRE(opened);
    db = std::move(opened).value();
    reg = std::make_unique<master::NodeRegistry>(
        io, *db, timeoutSeconds_, [this] { return now.load(); },
        [this](const std::string& line) { logs.push_back(line); });
    reg->setOnChange([this](const std::string&) { ++changes; });
    auto state = db->loadAll();
    REQUIRE(state);
    REQUIRE(reg->load(state.value()));
  }
  void close() {
    reg.reset();
    db.reset();
  }

  int64_t timeoutSeconds_;
};

}  // namespace yard::test
