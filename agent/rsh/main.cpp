// yard-rsh: OpenMPI's rsh agent inside a Yard launcher replica (OMPI_MCA_plm_rsh_agent).
// mpirun runs `yard-rsh HOST orted ARGS...`; like ssh, yard-rsh joins the command words into
// one line for `/bin/sh -c` and runs it inside the replica of the same task on HOST, through
// the master's exec channel (no sshd, no keys): stdout and stderr come back as they are
// written, and yard-rsh exits with the command's exit code (255 when it cannot run it, as
// ssh does). Who the caller is comes from the environment Yard gave the launcher:
// YARD_EXEC_MASTER, YARD_EXEC_TOKEN, YARD_JOB, YARD_TASK, YARD_ROLE, YARD_REPLICA_INDEX,
// YARD_ATTEMPT.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "common/tls/pki.h"
#include "common/wire/address_list.h"
#include "common/wire/client.h"
#include "schema/api.capnp.h"

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

void writeAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w <= 0) return;
    data += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int i = 1;
  while (i < argc && argv[i][0] == '-') ++i;  // ssh-style options mpirun may add: ignored
  if (argc - i < 2) {
    std::cerr << "usage: yard-rsh HOST COMMAND [ARGS...]\n";
    return 255;
  }
  std::string host = argv[i++];
  std::string line;
  for (; i < argc; ++i) line += (line.empty() ? "" : " ") + std::string(argv[i]);
  std::string master = env("YARD_EXEC_MASTER");
  if (master.empty()) {
    std::cerr << "yard-rsh: YARD_EXEC_MASTER is not set (only OpenMPI launchers run by Yard have it)\n";
    return 255;
  }
  // The master is the one whose chain holds the CA with this fingerprint (docs/security.md).
  auto tls = yard::wire::makePinnedClientTls(env("YARD_EXEC_CA"), nullptr);
  if (!tls) {
    std::cerr << "yard-rsh: YARD_EXEC_CA: " << tls.error() << "\n";
    return 255;
  }
  // With several masters (docs/ha.md) YARD_EXEC_MASTER lists them all, the leader at the time
  // first: the first that answers is used, and a follower's "not the leader" names the leader.
  std::vector<std::string> masters = yard::wire::splitAddressList(master);
  if (masters.empty()) masters.push_back(master);
  auto connect = [&tls](const std::string& address) { return yard::wire::FrameClient::connect(address, tls.value()); };
  auto client = connect(masters[0]);
  std::string why = client ? "" : masters[0] + ": " + client.error();
  for (size_t k = 1; !client && k < masters.size(); ++k) {
    client = connect(masters[k]);
    if (!client) why += "; " + masters[k] + ": " + client.error();
  }
  if (!client) {
    std::cerr << "yard-rsh: " << why << "\n";
    return 255;
  }
  capnp::MallocMessageBuilder msg;
  auto req = msg.initRoot<yard::api::Request>();
  req.setId(1);
  auto e = req.initExec();
  e.setToken(env("YARD_EXEC_TOKEN"));
  e.setJob(env("YARD_JOB"));
  e.setTask(env("YARD_TASK"));
  e.setRole(env("YARD_ROLE"));
  e.setIndex(std::atoi(env("YARD_REPLICA_INDEX").c_str()));
  e.setAttempt(std::atoi(env("YARD_ATTEMPT").c_str()));
  e.setHost(host);
  auto args = e.initArgv(3);
  args.set(0, "/bin/sh");
  args.set(1, "-c");
  args.set(2, line);
  if (auto sent = client.value()->sendRaw(yard::wire::encodeFrame(msg)); !sent) {
    std::cerr << "yard-rsh: " << sent.error() << "\n";
    return 255;
  }
  bool redirected = false;
  for (;;) {
    auto frame = client.value()->receive();
    if (!frame) {
      std::cerr << "yard-rsh: " << frame.error() << "\n";
      return 255;
    }
    auto r = frame.value()->root<yard::api::Response>();
    if (r.isExecOutput()) {
      auto d = r.getExecOutput().getData();
      writeAll(r.getExecOutput().getStream() == 2 ? 2 : 1, reinterpret_cast<const char*>(d.begin()), d.size());
    } else if (r.isExecExit()) {
      return r.getExecExit();
    } else if (r.isError()) {
      std::string message = r.getError().getMessage().cStr(), leader = r.getError().getLeader().cStr();
      // A follower made nothing: the request goes to the leader it names, once.
      if (!redirected && message.rfind(yard::wire::kNotLeader, 0) == 0 && !leader.empty()) {
        redirected = true;
        client = connect(leader);
        if (client) {
          if (auto sent = client.value()->sendRaw(yard::wire::encodeFrame(msg)); sent) continue;
        }
      }
      std::cerr << "yard-rsh: " << message << "\n";
      return 255;
    }
  }
}
