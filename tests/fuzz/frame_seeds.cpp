// The seed corpus of the API frame tests (frame_corpus_util.h): a valid frame of each kind the
// servers read, then hostile shapes.
#include <capnp/message.h>
#include <kj/string.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/fuzz/frame_corpus_util.h"

namespace frame_test {

std::vector<Input> generatedSeeds() {
  std::vector<Input> out;
  auto add = [&](const std::string& name, std::string bytes) { out.push_back({name, std::move(bytes)}); };
  add("client-ping", ping(1));
  add("client-job-submit-dag", submitDag(2));
  {
    capnp::MallocMessageBuilder m;
    auto r = m.initRoot<api::Request>();
    r.setId(3);
    r.setToken("ydt_admin");
    auto q = r.initQueueCreate();
    q.setName("team-a");
    q.initQuota().setCpuMillis(64000);
    q.setMaxRunningJobs(10);
    q.setWeight(2.5);
    q.initGrants(2).set(0, "alice");
    add("client-queue-create", encoded(m));
  }
  {
    capnp::MallocMessageBuilder m;
    auto r = m.initRoot<agentapi::AgentRequest>();
    r.setId(4);
    auto j = r.initJoin();
    j.setToken("yjt_0123456789abcdef");
    j.setNode("n1");
    j.setCsrPem("-----BEGIN CERTIFICATE REQUEST-----\nMIIBFAKE\n-----END CERTIFICATE REQUEST-----\n");
    j.setAddress("127.0.0.1");
    add("agent-join", encoded(m));
  }
  {
    capnp::MallocMessageBuilder m;
    auto r = m.initRoot<agentapi::AgentRequest>();
    r.setId(5);
    auto reg = r.initRegister();
    reg.setToken("yjt_0123456789abcdef");
    auto n = reg.initNode();
    n.setName("n1");
    n.setAddress("127.0.0.1");
    auto cap = n.initCapacity();
    cap.setCpuMillis(8000);
    cap.setMemoryBytes(int64_t{16} << 30);
    cap.setGpu(1);
    n.initGpus(1)[0].setIndex(0);
    auto labels = n.initLabels(1);
    labels[0].setKey("zone");
    labels[0].setValue("a");
    n.initDrivers(2).set(0, "host");
    n.getDrivers().set(1, "containerd");
    n.setAgentVersion("0.1.0");
    n.setAgentPort(7702);
    add("agent-register", encoded(m));
  }
  {
    capnp::MallocMessageBuilder m;
    auto r = m.initRoot<agentapi::AgentRequest>();
    r.setId(6);
    auto hb = r.initHeartbeat();
    hb.setToken("yjt_0123456789abcdef");
    hb.setNode("n1");
    auto reps = hb.initReplicas(2);
    reps[0].setReplicaId(41);
    reps[0].setAttempt(1);
    reps[0].setState(schema::ReplicaState::RUNNING);
    reps[0].setCpuMillisUsed(250);
    reps[0].setMemoryBytesUsed(1 << 20);
    reps[1].setReplicaId(42);
    reps[1].setAttempt(2);
    reps[1].setState(schema::ReplicaState::EXITED);
    reps[1].setExitCode(3);
    reps[1].setReason("exited with code 3");
    add("agent-heartbeat", encoded(m));
  }
  {
    capnp::MallocMessageBuilder m;
    auto r = m.initRoot<agentapi::AgentRequest>();
    r.setId(7);
    auto a = r.initArchiveLog();
    a.setToken("yjt_0123456789abcdef");
    a.setNode("n1");
    a.setJob("dag");
    a.setReplicaId(41);
    a.setData(kj::StringPtr("line one\nline two\n").asBytes());
    a.setLast(true);
    add("agent-archive-log", encoded(m));
  }
  {
    capnp::MallocMessageBuilder m;
    auto c = m.initRoot<agentapi::AgentCall>();
    c.setId(8);
    c.setToken("master-call");
    auto e = c.initExec();
    e.setReplicaId(41);
    e.setAttempt(1);
    auto argv = e.initArgv(3);
    argv.set(0, "sh");
    argv.set(1, "-c");
    argv.set(2, "id -u");
    e.setUserExec(true);
    e.setTty(true);
    e.setRows(24);
    e.setCols(80);
    e.setTerm("xterm");
    add("call-exec", encoded(m));
  }
  {
    capnp::MallocMessageBuilder m;
    auto c = m.initRoot<agentapi::AgentCall>();
    c.setId(9);
    auto l = c.initLogs();
    l.setReplicaId(41);
    l.setFollow(true);
    l.setTailLines(100);
    add("call-logs", encoded(m));
  }
  add("client-two-pings", ping(10) + ping(11));
  std::string p = ping(12);
  add("bad-truncated-header", p.substr(0, 3));
  add("bad-truncated-body", p.substr(0, p.size() - 5));
  add("bad-empty-frame", header(0));
  add("bad-misaligned-length", header(12) + std::string(12, 'x'));
  add("bad-oversized-header", header(0x7ffffff8) + std::string(8, '\0'));
  add("bad-segment-count", frameOfTable({0x7fffffffu, 1}, 1));
  add("bad-segment-size", frameOfTable({0, 100}, 1));
  add("bad-far-pointer-loop", frameOfSegments({{farPointer(0, 0, false)}}));
  add("bad-far-pointer-missing-segment", frameOfSegments({{farPointer(7, 0, false)}}));
  add("odd-double-far-to-itself", frameOfSegments({{farPointer(0, 0, true), 0}}));
  add("bad-alias-bomb", aliasBomb(4000, 8000));
  add("bad-ping-then-garbage", ping(13) + header(16) + std::string(16, '\xff'));
  return out;
}

}  // namespace frame_test
