#include "master/yardctl/client.h"

#include "common/config/client_config.h"
#include "common/tls/pki.h"

namespace yard::ctl {

Result<MasterTarget> masterAddress(const GlobalOptions& global) {
  using R = Result<MasterTarget>;
  // Flags (and $YARD_MASTER, $YARD_TOKEN, $YARD_CA, which main put in `global`), then the
  // config file's entry for the master, then its defaults (common/config/client_config.h).
  auto settings = config::resolveClientSettings(global.master, global.token, global.ca);
  if (!settings) return R::fail(settings.error());
  MasterTarget t{settings.value().master, settings.value().token, settings.value().ca};
  if (t.address.empty())
    return R::fail("no master address: pass --master HOST:PORT, set YARD_MASTER, or set master in " +
                   (settings.value().configPath.empty() ? std::string("~/.config/yard/config.toml") : settings.value().configPath));
  return R::ok(t);
}

Result<std::unique_ptr<wire::FrameClient>> connectMaster(const MasterTarget& target, std::chrono::milliseconds timeout) {
  using R = Result<std::unique_ptr<wire::FrameClient>>;
  if (target.ca.empty())
    return R::fail("no CA certificate to verify the master at " + target.address +
                   " with: pass --ca FILE, set YARD_CA, or set ca in ~/.config/yard/config.toml (the master's "
                   "<data-dir>/ca.pem)");
  auto pem = tls::readFile(target.ca);
  if (!pem) return R::fail("--ca: " + pem.error());
  auto settings = wire::makeClientTls(pem.value(), nullptr, tls::kMasterName);
  if (!settings) return R::fail("--ca " + target.ca + ": " + settings.error());
  return wire::FrameClient::connect(target.address, settings.value(), timeout);
}

Result<std::unique_ptr<wire::Frame>> sendRequest(const MasterTarget& target, capnp::MessageBuilder& message) {
  using R = Result<std::unique_ptr<wire::Frame>>;
  message.getRoot<api::Request>().setToken(target.token);
  auto client = connectMaster(target);
  if (!client) return R::fail(client.error());
  auto resp = client.value()->call(message);
  if (!resp) return resp;
  auto r = resp.value()->root<api::Response>();
  if (r.isError()) return R::fail(r.getError().getMessage());
  return resp;
}

}  // namespace yard::ctl
