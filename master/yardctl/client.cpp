#include "master/yardctl/client.h"
#include "common/config/client_config.h"
#include "common/wire/address_list.h"

#include <thread>
#include <algorithm>
#include <iostream>
#include <random>
#include <set>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "common/config/client_config.h"
#include "common/tls/pki.h"

namespace yard::ctl {

Result<MasterTarget> masterAddress(const GlobalOptions& global) {
  using R = Result<MasterTarget>;
  if (!global.masterEnvError.empty()) return R::fail(global.masterEnvError);
  // Flags (and $YARD_MASTER, $YARD_TOKEN, $YARD_CA, which main put in `global`), then the
  // config file's entry for the master, then its defaults (common/config/client_config.h).
  auto settings = config::resolveClientSettings(global.master, global.token, global.ca);
  if (!settings) return R::fail(settings.error());
  MasterTarget t{settings.value().master, settings.value().token, settings.value().ca, global.requestId};
  if (t.address.empty())
    return R::fail("no master address: pass --master HOST:PORT, set YARD_MASTER, or set master in " +
                   (settings.value().configPath.empty() ? std::string("~/.config/yard/config.toml") : settings.value().configPath));
  return R::ok(t);
}

namespace {

// Where yardctl keeps the TLS session of a master (wire::ClientTls::sessionFile): one file
// per (address, CA, name) under $XDG_CACHE_HOME/yard or ~/.cache/yard (0700), so that the
// next yardctl resumes instead of verifying the master's certificate again. "" when there is
// no home to keep it in.
std::string sessionFile(const std::string& address, const std::string& caPem) {
  std::string dir;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = std::string(x) + "/yard";
  else if (const char* h = std::getenv("HOME"); h && *h) dir = std::string(h) + "/.cache/yard";
  else return "";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return "";
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
  uint64_t h = 1469598103934665603ULL;  // FNV-1a: stable across builds
  for (char c : address + "\n" + caPem + "\n" + tls::kMasterName) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  char name[40];
  std::snprintf(name, sizeof name, "tls-session-%016llx", static_cast<unsigned long long>(h));
  return dir + "/" + name;
}

}  // namespace

Result<std::unique_ptr<wire::FrameClient>> connectMaster(const MasterTarget& target, std::chrono::milliseconds timeout) {
  using R = Result<std::unique_ptr<wire::FrameClient>>;
  if (target.ca.empty()) {
    std::string file = config::clientConfigPath();
    return R::fail("no CA certificate to verify the master at " + target.address +
                   " with: pass --ca FILE, set YARD_CA, or set ca in " +
                   (file.empty() ? std::string("~/.config/yard/config.toml") : file) +
                   " (the master's <data-dir>/ca.pem)");
  }
  auto pem = tls::readFile(target.ca);
  if (!pem) return R::fail("--ca: " + pem.error());
  auto settings = wire::makeClientTls(pem.value(), nullptr, tls::kMasterName);
  if (!settings) return R::fail("--ca " + target.ca + ": " + settings.error());
  wire::ClientTls tls = settings.value();
  tls.sessionFile = sessionFile(target.address, pem.value());
  return wire::FrameClient::connect(target.address, tls, timeout);
}

namespace {

// Calls the leader of the masters in `target` (docs/ha.md): each address in turn; a follower's
// "not the leader" is followed to the leader it names (a few hops at most); while no master
// knows a leader (an election), the list is tried again for a few seconds. Returns the
// connection and the answer; an api::Error other than "not the leader" is an answer too.
struct Called {
  std::unique_ptr<wire::FrameClient> client;
  std::unique_ptr<wire::Frame> frame;
};
// How long a request with an id waits for its answer before it is sent again.
constexpr std::chrono::seconds kResendAfter{5};

Result<Called> callLeader(const MasterTarget& target, capnp::MessageBuilder& message, std::chrono::milliseconds timeout) {
  using R = Result<Called>;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(6);
  std::vector<std::string> addresses = wire::splitAddressList(target.address);
  if (addresses.empty()) addresses.push_back(target.address);
  bool resendable = message.getRoot<api::Request>().asReader().hasRequestId();
  // With several masters, one whose host is gone (no answer at all, not even a refusal) is
  // passed after 2 s, not after the whole timeout.
  auto connectTimeout = addresses.size() > 1 ? std::min(timeout, std::chrono::milliseconds(2000)) : timeout;
  int resent = 0;
  // Masters that did not answer at all in this call (gone, or cut off): not asked again, nor
  // followed to when a follower still names one as the leader, until every one of them failed.
  std::set<std::string> gone;
  for (;;) {
    std::string why;
    bool election = false;
    if (gone.size() >= addresses.size()) gone.clear();
    for (const std::string& first : addresses) {
      if (gone.count(first) != 0) continue;
      MasterTarget to = target;
      to.address = first;
      for (int hop = 0; hop < 4; ++hop) {
        if (hop > 0 && gone.count(to.address) != 0) {  // a leader named, but gone: an election is due
          election = true;
          why += (why.empty() ? "" : "; ") + first + ": names " + to.address +
                 " as the leader, which did not answer (an election is due)";
          break;
        }
        // A leader a follower names may have just gone (a failover): it gets the short timeout
        // of a list of masters even when one master was given.
        auto client = connectMaster(to, hop > 0 ? std::min(timeout, std::chrono::milliseconds(2000)) : connectTimeout);
        if (!client) {
          why += (why.empty() ? "" : "; ") + client.error();
          // No answer at all (its host gone, its network cut): not asked again in this call. A
          // refusal is quick and means nothing listens there now: a master starting again, or
          // one taking the lead (its follower's port closed, the leader's not yet open); it is
          // asked again on the next pass.
          if (client.error().find("timed out") != std::string::npos) gone.insert(to.address);
          // A leader a follower named but that does not answer has just gone: the followers
          // learn of it at their election timeout.
          election = election || hop > 0;
          break;
        }
        // Lost after the request went: whether it was made is unknown (the master may have
        // committed it and died before answering). Only a request with an id is sent again:
        // a master that made it answers what it answered then (docs/ha.md). Such a request
        // also waits for its answer for a limited time: a master whose host or network went
        // mid-request ends nothing, and the request is sent again elsewhere.
        auto resp = resendable ? client.value()->call(message, kResendAfter) : client.value()->call(message);
        if (!resp) {
          if (!resendable || resent >= 3) return R::fail(resp.error());
          ++resent;
          std::cerr << "yardctl: the connection to " << to.address << " was lost before its answer (" << resp.error()
                    << "); sending the request again with its request id, which a master makes once\n";
          why += (why.empty() ? "" : "; ") + to.address + ": " + resp.error() + " (sent again, with its request id)";
          election = true;
          until = std::max(until, std::chrono::steady_clock::now() + std::chrono::seconds(6));
          if (resp.error().rfind("no answer", 0) == 0) gone.insert(to.address);
          break;
        }
        auto r = resp.value()->root<api::Response>();
        std::string error = r.isError() ? r.getError().getMessage().cStr() : "";
        if (error.rfind(wire::kNotLeader, 0) != 0) return R::ok(Called{std::move(client).value(), std::move(resp).value()});
        // The master lost the lead with this change in flight: the next leader may still commit
        // it, so its outcome is unknown, as with a lost connection above.
        if (error.find(wire::kLeadLost) != std::string::npos) {
          if (!resendable || resent >= 3) return R::ok(Called{std::move(client).value(), std::move(resp).value()});
          ++resent;
          std::cerr << "yardctl: " << to.address
                    << " lost the lead before the change was committed; sending the request again with its "
                       "request id, which a master makes once\n";
          why += (why.empty() ? "" : "; ") + to.address + ": " + error + " (sent again, with its request id)";
          election = true;
          until = std::max(until, std::chrono::steady_clock::now() + std::chrono::seconds(6));
          break;
        }
        std::string leader = r.getError().getLeader().cStr();
        if (leader.empty() || leader == to.address) {
          election = election || leader.empty();
          why += (why.empty() ? "" : "; ") + to.address + ": " + error;
          break;
        }
        to.address = leader;
      }
    }
    if (!election || std::chrono::steady_clock::now() >= until) return R::fail(why);
    // Asked again soon: a new leader serves some 50-100 ms after it is elected.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// 16 random bytes, hex.
std::string newRequestId() {
  std::random_device rd;
  std::string out;
  static const char* hex = "0123456789abcdef";
  for (int i = 0; i < 4; ++i) {
    uint32_t v = rd();
    for (int j = 0; j < 4; ++j, v >>= 8) {
      out += hex[(v >> 4) & 15];
      out += hex[v & 15];
    }
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<wire::Frame>> sendRequest(const MasterTarget& target, capnp::MessageBuilder& message) {
  using R = Result<std::unique_ptr<wire::Frame>>;
  auto req = message.getRoot<api::Request>();
  req.setToken(target.token);
  // Job changes and creates of queues, datasets, users and tokens carry an id, so that one
  // lost with its connection may be sent again.
  if (!req.hasRequestId() &&
      (req.isJobSubmit() || req.isJobSubmitAll() || req.isJobCancel() || req.isJobDelete() || req.isJobHold() ||
       req.isJobRelease() || req.isJobRequeue() || req.isJobScale() || req.isQueueCreate() || req.isDatasetCreate() ||
       req.isUserCreate() || req.isUserTokenCreate() || req.isJoinTokenCreate()))
    req.setRequestId(target.requestId.empty() ? newRequestId() : target.requestId);
  auto called = callLeader(target, message, std::chrono::seconds(10));
  if (!called) return R::fail(called.error());
  auto r = called.value().frame->root<api::Response>();
  if (r.isError()) return R::fail(r.getError().getMessage());
  return R::ok(std::move(called).value().frame);
}

Result<std::unique_ptr<wire::FrameClient>> connectLeader(const MasterTarget& target, std::chrono::milliseconds timeout) {
  using R = Result<std::unique_ptr<wire::FrameClient>>;
  capnp::MallocMessageBuilder ping;
  auto req = ping.initRoot<api::Request>();
  req.setId(1);
  req.setPing();
  auto called = callLeader(target, ping, timeout);
  if (!called) return R::fail(called.error());
  return R::ok(std::move(called).value().client);
}

}  // namespace yard::ctl
