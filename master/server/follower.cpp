#include "master/server/follower.h"

#include <capnp/message.h>

#include <asio.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "common/wire/address_list.h"
#include "master/api/client/cluster_info.h"
#include "master/api/http/event_feed.h"
#include "master/api/http/gateway.h"
#include "master/api/http/http_api.h"
#include "master/ha/raft_transport.h"
#include "schema/agent.capnp.h"
#include "schema/api.capnp.h"

namespace yard::master {

struct Follower::Impl {
  FollowerSettings s;
  ha::RaftNode* raft = nullptr;
  asio::io_context io;
  std::thread ioThread, lookupThread;
  std::atomic<bool> following{true};
  std::unique_ptr<wire::FrameServer> client, agent;
  std::unique_ptr<Gateway> gateway;
  std::unique_ptr<EventFeed> feed;
  std::unique_ptr<HttpApi> http;
  mutable std::mutex mu;
  std::string leaderRaft, leaderClient, leaderAgent;  // guarded by mu

  std::string leaderClientAddress() const {
    std::lock_guard<std::mutex> lock(mu);
    return leaderClient;
  }
  std::string leaderAgentAddress() const {
    std::lock_guard<std::mutex> lock(mu);
    return leaderAgent;
  }

  std::optional<std::string> listen() {
    auto c = wire::FrameServer::listen(
        io, s.clientListen, s.clientTls, s.clientLimits,
        [this](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
          auto req = frame->root<api::Request>();
          if (req.isClusterStatusStale() && s.staleClusterStatus) return staleStatus(conn, req.getId(), req.getToken());
          std::string leader = leaderClientAddress();
          capnp::MallocMessageBuilder message;
          auto resp = message.initRoot<api::Response>();
          resp.setId(req.getId());
          auto e = resp.initError();
          e.setMessage(std::string(wire::kNotLeader) +
                       (leader.empty() ? ": no leader is known yet; try again, or another master"
                                       : ": the leader's client API is at " + leader));
          e.setLeader(leader);
          conn->send(message);
        },
        s.log);
    if (!c) return c.error();
    client = std::move(c).value();
    auto a = wire::FrameServer::listen(
        io, s.agentListen, s.agentTls, s.agentLimits,
        [this](const std::shared_ptr<wire::Connection>& conn, std::unique_ptr<wire::Frame> frame) {
          std::string leader = leaderAgentAddress();
          capnp::MallocMessageBuilder message;
          auto resp = message.initRoot<agentapi::AgentResponse>();
          resp.setId(frame->root<agentapi::AgentRequest>().getId());
          resp.setError(std::string(wire::kNotLeader) +
                        (leader.empty() ? ": no leader is known yet" : ": the leader's agent API is at " + leader));
          conn->send(message);
        },
        s.log);
    if (!a) return a.error();
    agent = std::move(a).value();
    // The HTTP API and the console: every request forwarded to the leader's client API, as the
    // leader's own HTTP API sends it to its own.
    if (s.httpListen.has_value() && !s.httpListen->empty()) {
      gateway = std::make_unique<Gateway>(
          io, [this] { return leaderClientAddress(); },
          std::string(wire::kNotLeader) + ": no leader is known yet; try again", s.gatewayTls, s.log);
      feed = std::make_unique<EventFeed>(1);
      HttpApiOptions o;
      o.listen = *s.httpListen;
      o.consoleDir = s.consoleDir;
      o.follower = true;
      http = std::make_unique<HttpApi>(io, *gateway, *feed, o, s.log);
      if (auto started = http->start(s.httpTls); !started) return started.error();
      s.log("HTTP API on https://" + http->address() + "/ while following: it forwards to the leader");
    }
    return std::nullopt;
  }

  // cluster status --stale: answered from a thread (it asks each member, up to a second or
  // two), at most kMaxStaleAsks at once; those are joined before the io thread ends.
  static constexpr size_t kMaxStaleAsks = 4;
  struct Ask {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done = std::make_shared<std::atomic<bool>>(false);
  };
  std::mutex asksMu;
  std::vector<Ask> asks;    // guarded by asksMu; finished ones are joined when the next comes
  bool asksClosed = false;  // guarded by asksMu: stop() has begun

  void staleStatus(const std::shared_ptr<wire::Connection>& conn, uint64_t id, std::string token) {
    auto answer = [conn, id](const Result<ClusterView>& view) {
      capnp::MallocMessageBuilder message;
      auto resp = message.initRoot<api::Response>();
      resp.setId(id);
      if (view) fillClusterInfo(resp.initCluster(), view.value(), /*stale=*/true);
      else resp.initError().setMessage(view.error());
      conn->send(message);
    };
    std::lock_guard<std::mutex> lock(asksMu);
    if (asksClosed) return;
    for (auto it = asks.begin(); it != asks.end();) {
      if (!it->done->load()) {
        ++it;
        continue;
      }
      it->thread.join();  // finished: at once
      it = asks.erase(it);
    }
    if (asks.size() >= kMaxStaleAsks)
      return answer(Result<ClusterView>::fail("cluster status --stale: this master is answering " +
                                              std::to_string(asks.size()) + " such requests already; try again"));
    Ask ask;
    try {
      ask.thread = std::thread([this, answer, done = ask.done, token = std::move(token), source = conn->peer()] {
        answer(s.staleClusterStatus(token, source));
        *done = true;
      });
    } catch (const std::system_error& e) {  // out of threads: a refusal, not an abort
      return answer(Result<ClusterView>::fail(std::string("cluster status --stale: cannot start a thread: ") + e.what() +
                                              "; try again"));
    }
    asks.push_back(std::move(ask));
  }

  void joinAsks() {
    std::vector<Ask> left;
    {
      std::lock_guard<std::mutex> lock(asksMu);
      asksClosed = true;
      left.swap(asks);
    }
    for (auto& a : left) a.thread.join();
  }

  // Who leads, in client and agent addresses: asked of the leader whenever raft names another.
  void lookup() {
    while (following) {
      auto st = raft->status();
      std::string known;
      {
        std::lock_guard<std::mutex> lock(mu);
        known = leaderRaft;
      }
      if (st.leaderAddress.empty() || st.leaderId == raft->id()) {
        // No leader (an election, a dead leader forgotten, no majority): clients and agents
        // are told so, not sent to the last one's port.
        if (!known.empty()) {
          std::lock_guard<std::mutex> lock(mu);
          leaderRaft.clear();
          leaderClient.clear();
          leaderAgent.clear();
        }
      } else if (st.leaderAddress != known) {
        auto who = ha::callMaster(st.leaderAddress, s.callTls, {"whois"}, std::chrono::seconds(1));
        // whois: ok, name, client address, agent address, role, term, applied index
        if (who && who.value().size() == 7 && who.value()[0] == "ok" && who.value()[4] == "leader") {
          {
            std::lock_guard<std::mutex> lock(mu);
            leaderRaft = st.leaderAddress;
            leaderClient = who.value()[2];
            leaderAgent = who.value()[3];
          }
          // This master may lack archived logs (down, new, or restarted empty): the leader
          // catches it up (server/log_sync.h). An older leader refuses the call; no harm.
          (void)ha::callMaster(st.leaderAddress, s.callTls, {"archive-sync"}, std::chrono::seconds(1));
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  void stop() {
    following = false;
    if (lookupThread.joinable()) lookupThread.join();
    joinAsks();  // their answers go out through the io thread, still running
    if (!ioThread.joinable()) return;
    // The listeners stop on their own thread, and are closed before this returns.
    std::promise<void> stopped;
    asio::post(io, [this, &stopped] {
      if (client) client->stop();
      if (agent) agent->stop();
      if (http) http->stop();
      stopped.set_value();
    });
    stopped.get_future().wait();
    io.stop();
    ioThread.join();
  }
};

Result<std::unique_ptr<Follower>> Follower::start(FollowerSettings settings, ha::RaftNode& raft) {
  using R = Result<std::unique_ptr<Follower>>;
  auto impl = std::make_unique<Impl>();
  impl->s = std::move(settings);
  impl->raft = &raft;
  if (auto e = impl->listen()) return R::fail(*e);
  Impl* i = impl.get();
  i->ioThread = std::thread([i] {
    auto work = asio::make_work_guard(i->io);
    i->io.run();
  });
  i->lookupThread = std::thread([i] { i->lookup(); });
  return R::ok(std::unique_ptr<Follower>(new Follower(std::move(impl))));
}

Follower::Follower(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Follower::~Follower() {
  impl_->stop();
  // The HTTP API goes before the gateway and feed it holds.
  impl_->http.reset();
  impl_->gateway.reset();
}

std::string Follower::clientAddress() const { return impl_->client->address(); }
std::string Follower::agentAddress() const { return impl_->agent->address(); }

}  // namespace yard::master
