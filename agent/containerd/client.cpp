#include "agent/containerd/client.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <openssl/evp.h>
#include <sys/utsname.h>

#include <cstdio>
#include <mutex>
#include <thread>

#include "github.com/containerd/cgroups/stats/v1/metrics.pb.h"
#include "github.com/containerd/cgroups/v2/stats/metrics.pb.h"
#include "github.com/containerd/containerd/api/services/containers/v1/containers.grpc.pb.h"
#include "github.com/containerd/containerd/api/services/content/v1/content.grpc.pb.h"
#include "github.com/containerd/containerd/api/services/events/v1/events.grpc.pb.h"
#include "github.com/containerd/containerd/api/services/images/v1/images.grpc.pb.h"
#include "github.com/containerd/containerd/api/services/namespaces/v1/namespace.grpc.pb.h"
#include "github.com/containerd/containerd/api/services/snapshots/v1/snapshots.grpc.pb.h"
#include "github.com/containerd/containerd/api/services/tasks/v1/tasks.grpc.pb.h"
#include "github.com/containerd/containerd/api/services/version/v1/version.grpc.pb.h"

namespace yard::containerd {
namespace {

namespace ns = ::containerd::services::namespaces::v1;
namespace ver = ::containerd::services::version::v1;
namespace ctr = ::containerd::services::containers::v1;
namespace content = ::containerd::services::content::v1;
namespace events = ::containerd::services::events::v1;
namespace images = ::containerd::services::images::v1;
namespace snap = ::containerd::services::snapshots::v1;
namespace tasks = ::containerd::services::tasks::v1;
using google::protobuf::Struct;
using google::protobuf::Value;

// Calls wait this long by default; a thread may set its own (see the header).
thread_local std::chrono::milliseconds callTimeout = std::chrono::seconds(10);

template <typename T>
Result<T> failed(const std::string& what, const grpc::Status& s) {
  return Result<T>::fail("containerd: " + what + ": " + s.error_message() + " (gRPC code " +
                         std::to_string(static_cast<int>(s.error_code())) + ")");
}

// Every call names its containerd namespace in metadata, as containerd's own clients do.
std::unique_ptr<grpc::ClientContext> context(const std::string& nsName = "") {
  auto c = std::make_unique<grpc::ClientContext>();
  c->set_deadline(std::chrono::system_clock::now() + callTimeout);
  if (!nsName.empty()) c->AddMetadata("containerd-namespace", nsName);
  return c;
}

template <typename T>
Result<T> ok(T v) {
  return Result<T>::ok(std::move(v));
}

bool notFound(const grpc::Status& s) { return s.error_code() == grpc::StatusCode::NOT_FOUND; }

// A removal or signal: true when it was done, false when there was nothing to act on.
Result<bool> done(const std::string& what, const grpc::Status& s) {
  if (notFound(s)) return Result<bool>::ok(false);
  if (!s.ok()) return failed<bool>(what, s);
  return Result<bool>::ok(true);
}

std::string sha256Hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  std::string hex;
  char b[3];
  for (unsigned i = 0; i < len; ++i) {
    std::snprintf(b, sizeof b, "%02x", md[i]);
    hex += b;
  }
  return hex;
}

// A JSON object's field as text / list of texts ("" / {} when absent or of another type).
const Value* field(const Struct& s, const std::string& name) {
  auto it = s.fields().find(name);
  return it == s.fields().end() ? nullptr : &it->second;
}
std::string text(const Struct& s, const std::string& name) {
  const Value* v = field(s, name);
  return v && v->has_string_value() ? v->string_value() : "";
}
std::vector<std::string> texts(const Struct& s, const std::string& name) {
  std::vector<std::string> out;
  const Value* v = field(s, name);
  if (v && v->has_list_value())
    for (const auto& x : v->list_value().values())
      if (x.has_string_value()) out.push_back(x.string_value());
  return out;
}
const Struct* object(const Struct& s, const std::string& name) {
  const Value* v = field(s, name);
  return v && v->has_struct_value() ? &v->struct_value() : nullptr;
}

std::string hostArchitecture() {
  utsname u{};
  uname(&u);
  std::string m = u.machine;
  if (m == "x86_64") return "amd64";
  if (m == "aarch64") return "arm64";
  return m;
}

void toProto(const Client::Mount& m, ::containerd::types::Mount* out) {
  out->set_type(m.type);
  out->set_source(m.source);
  out->set_target(m.target);
  for (const auto& o : m.options) out->add_options(o);
}

std::vector<Client::Mount> fromProto(const google::protobuf::RepeatedPtrField<::containerd::types::Mount>& in) {
  std::vector<Client::Mount> out;
  for (const auto& m : in) out.push_back({m.type(), m.source(), m.target(), {m.options().begin(), m.options().end()}});
  return out;
}

}  // namespace

// The chain id of layers with these uncompressed digests (the OCI image spec's ChainID):
// the snapshot name containerd unpacks the image's root to.
std::string chainId(const std::vector<std::string>& diffIds) {
  std::string chain;
  for (const auto& d : diffIds) chain = chain.empty() ? d : "sha256:" + sha256Hex(chain + " " + d);
  return chain;
}

void Client::setCallTimeoutOfThisThread(std::chrono::milliseconds timeout) { callTimeout = timeout; }

bool unreachable(const std::string& error) {
  return error.find("(gRPC code 14)") != std::string::npos || error.find("(gRPC code 4)") != std::string::npos;
}

struct Client::Impl {
  std::string socket;
  std::shared_ptr<grpc::Channel> channel;
  // One stub per service, made once (stubs are thread-safe).
  std::unique_ptr<ver::Version::Stub> version;
  std::unique_ptr<ns::Namespaces::Stub> namespaces;
  std::unique_ptr<ctr::Containers::Stub> containers;
  std::unique_ptr<content::Content::Stub> content;
  std::unique_ptr<images::Images::Stub> images;
  std::unique_ptr<snap::Snapshots::Stub> snapshots;
  std::unique_ptr<tasks::Tasks::Stub> tasks;
  std::unique_ptr<events::Events::Stub> events;
  std::mutex watchMu;  // guards the two below
  grpc::ClientContext* watching = nullptr;
  bool stopWatching = false;
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::connect(const std::string& socketPath, std::chrono::milliseconds timeout) {
  using R = Result<std::unique_ptr<Client>>;
  auto impl = std::make_unique<Impl>();
  impl->socket = socketPath;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(16 << 20);
  // After containerd restarts, reconnect within a second or two (gRPC's default backoff
  // grows to two minutes).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  impl->channel = grpc::CreateCustomChannel("unix://" + socketPath, grpc::InsecureChannelCredentials(), args);
  impl->version = ver::Version::NewStub(impl->channel);
  impl->namespaces = ns::Namespaces::NewStub(impl->channel);
  impl->containers = ctr::Containers::NewStub(impl->channel);
  impl->content = content::Content::NewStub(impl->channel);
  impl->images = images::Images::NewStub(impl->channel);
  impl->snapshots = snap::Snapshots::NewStub(impl->channel);
  impl->tasks = tasks::Tasks::NewStub(impl->channel);
  impl->events = events::Events::NewStub(impl->channel);
  if (!impl->channel->WaitForConnected(std::chrono::system_clock::now() + timeout))
    return R::fail("containerd at " + socketPath + " did not answer within " + std::to_string(timeout.count()) + " ms");
  return R::ok(std::make_unique<Client>(std::move(impl)));
}

Result<std::string> Client::version() {
  auto& stub = impl_->version;
  google::protobuf::Empty req;
  ver::VersionResponse resp;
  auto c = context();
  auto s = stub->Version(c.get(), req, &resp);
  if (!s.ok()) return failed<std::string>("version", s);
  return Result<std::string>::ok(resp.version() + " (revision " + resp.revision() + ")");
}

Result<bool> Client::ensureNamespace(const std::string& name) {
  auto& stub = impl_->namespaces;
  ns::CreateNamespaceRequest req;
  req.mutable_namespace_()->set_name(name);
  ns::CreateNamespaceResponse resp;
  auto c = context(name);  // containerd publishes a create event in the namespace of the call
  auto s = stub->Create(c.get(), req, &resp);
  if (s.ok()) return Result<bool>::ok(true);
  if (s.error_code() == grpc::StatusCode::ALREADY_EXISTS) return Result<bool>::ok(false);
  return failed<bool>("create namespace " + name, s);
}

Result<std::vector<std::string>> Client::namespaces() {
  using R = Result<std::vector<std::string>>;
  auto& stub = impl_->namespaces;
  ns::ListNamespacesRequest req;
  ns::ListNamespacesResponse resp;
  auto c = context();
  auto s = stub->List(c.get(), req, &resp);
  if (!s.ok()) return failed<std::vector<std::string>>("list namespaces", s);
  std::vector<std::string> out;
  for (const auto& n : resp.namespaces()) out.push_back(n.name());
  return R::ok(std::move(out));
}

Result<std::vector<std::string>> Client::containers(const std::string& nsName, const std::string& filter) {
  using R = Result<std::vector<std::string>>;
  auto& stub = impl_->containers;
  ctr::ListContainersRequest req;
  if (!filter.empty()) req.add_filters(filter);
  ctr::ListContainersResponse resp;
  auto c = context(nsName);
  auto s = stub->List(c.get(), req, &resp);
  if (!s.ok()) return failed<std::vector<std::string>>("list containers in " + nsName, s);
  std::vector<std::string> out;
  for (const auto& x : resp.containers()) out.push_back(x.id());
  return R::ok(std::move(out));
}

namespace {

// A blob of the content store, whole (manifests and configs are small).
Result<std::string> readBlob(content::Content::Stub& stub, const std::string& nsName, const std::string& digest) {
  content::ReadContentRequest req;
  req.set_digest(digest);
  auto c = context(nsName);
  auto reader = stub.Read(c.get(), req);
  content::ReadContentResponse chunk;
  std::string data;
  while (reader->Read(&chunk)) {
    data += chunk.data();
    if (data.size() > (8u << 20)) return Result<std::string>::fail("containerd: blob " + digest + " is over 8 MiB");
  }
  auto s = reader->Finish();
  if (!s.ok()) return failed<std::string>("read " + digest, s);
  return ok(std::move(data));
}

Result<Struct> parseJson(const std::string& json, const std::string& what) {
  Struct out;
  auto st = google::protobuf::util::JsonStringToMessage(json, &out);
  if (!st.ok()) return Result<Struct>::fail("containerd: " + what + " is not a JSON object: " + st.ToString());
  return ok(std::move(out));
}

}  // namespace

Result<std::optional<Client::ImageConfig>> Client::image(const std::string& nsName, const std::string& ref) {
  using R = Result<std::optional<ImageConfig>>;
  auto& stub = impl_->images;
  images::GetImageRequest req;
  req.set_name(ref);
  images::GetImageResponse resp;
  auto c = context(nsName);
  auto s = stub->Get(c.get(), req, &resp);
  if (notFound(s)) return R::ok(std::nullopt);
  if (!s.ok()) return failed<std::optional<ImageConfig>>("get image " + ref, s);
  std::string digest = resp.image().target().digest();
  std::string mediaType = resp.image().target().media_type();
  // An index (multi-platform) names one manifest per platform: take this host's.
  for (int depth = 0; depth < 2 && (mediaType.find("index") != std::string::npos ||
                                    mediaType.find("manifest.list") != std::string::npos); ++depth) {
    auto blob = readBlob(*impl_->content, nsName, digest);
    if (!blob) return R::fail(blob.error());
    auto index = parseJson(blob.value(), "the index of " + ref);
    if (!index) return R::fail(index.error());
    const Value* list = field(index.value(), "manifests");
    std::string arch = hostArchitecture(), chosen;
    if (list && list->has_list_value())
      for (const auto& m : list->list_value().values()) {
        if (!m.has_struct_value()) continue;
        const Struct* platform = object(m.struct_value(), "platform");
        if (platform && text(*platform, "os") == "linux" && text(*platform, "architecture") == arch) {
          chosen = text(m.struct_value(), "digest");
          mediaType = text(m.struct_value(), "mediaType");
          break;
        }
      }
    if (chosen.empty()) return R::fail("image " + ref + " has no manifest for linux/" + arch);
    digest = chosen;
  }
  auto manifestBlob = readBlob(*impl_->content, nsName, digest);
  if (!manifestBlob) return R::fail(manifestBlob.error());
  auto manifest = parseJson(manifestBlob.value(), "the manifest of " + ref);
  if (!manifest) return R::fail(manifest.error());
  const Struct* configDesc = object(manifest.value(), "config");
  if (!configDesc || text(*configDesc, "digest").empty()) return R::fail("image " + ref + ": its manifest names no config");
  auto configBlob = readBlob(*impl_->content, nsName, text(*configDesc, "digest"));
  if (!configBlob) return R::fail(configBlob.error());
  auto config = parseJson(configBlob.value(), "the config of " + ref);
  if (!config) return R::fail(config.error());
  ImageConfig out;
  const Struct* rootfs = object(config.value(), "rootfs");
  if (!rootfs) return R::fail("image " + ref + ": its config has no rootfs");
  out.chainId = chainId(texts(*rootfs, "diff_ids"));
  if (out.chainId.empty()) return R::fail("image " + ref + ": its config lists no layers (rootfs.diff_ids)");
  if (const Struct* cfg = object(config.value(), "config")) {
    out.env = texts(*cfg, "Env");
    out.entrypoint = texts(*cfg, "Entrypoint");
    out.cmd = texts(*cfg, "Cmd");
    out.workingDir = text(*cfg, "WorkingDir");
    out.user = text(*cfg, "User");
  }
  return R::ok(std::move(out));
}

Result<std::vector<Client::Mount>> Client::prepareSnapshot(const std::string& nsName, const std::string& snapshotter,
                                                           const std::string& key, const std::string& parent) {
  auto& stub = impl_->snapshots;
  snap::PrepareSnapshotRequest req;
  req.set_snapshotter(snapshotter);
  req.set_key(key);
  req.set_parent(parent);
  (*req.mutable_labels())["yard.replica"] = key;
  snap::PrepareSnapshotResponse resp;
  auto c = context(nsName);
  auto s = stub->Prepare(c.get(), req, &resp);
  if (!s.ok()) return failed<std::vector<Mount>>("prepare snapshot " + key + " on " + parent, s);
  return ok(fromProto(resp.mounts()));
}

Result<bool> Client::removeSnapshot(const std::string& nsName, const std::string& snapshotter, const std::string& key) {
  auto& stub = impl_->snapshots;
  snap::RemoveSnapshotRequest req;
  req.set_snapshotter(snapshotter);
  req.set_key(key);
  google::protobuf::Empty resp;
  auto c = context(nsName);
  auto s = stub->Remove(c.get(), req, &resp);
  return done("remove snapshot " + key, s);
}

Result<bool> Client::createContainer(const std::string& nsName, const ContainerSpec& spec) {
  auto& stub = impl_->containers;
  ctr::CreateContainerRequest req;
  auto* c = req.mutable_container();
  c->set_id(spec.id);
  c->set_image(spec.image);
  c->mutable_runtime()->set_name(spec.runtime);
  c->mutable_spec()->set_type_url("types.containerd.io/opencontainers/runtime-spec/1/Spec");
  c->mutable_spec()->set_value(spec.ociSpecJson);
  c->set_snapshotter(spec.snapshotter);
  c->set_snapshot_key(spec.snapshotKey);
  for (const auto& [k, v] : spec.labels) (*c->mutable_labels())[k] = v;
  ctr::CreateContainerResponse resp;
  auto ctx = context(nsName);
  auto s = stub->Create(ctx.get(), req, &resp);
  if (!s.ok()) return failed<bool>("create container " + spec.id, s);
  return ok(true);
}

Result<bool> Client::deleteContainer(const std::string& nsName, const std::string& id) {
  auto& stub = impl_->containers;
  ctr::DeleteContainerRequest req;
  req.set_id(id);
  google::protobuf::Empty resp;
  auto c = context(nsName);
  auto s = stub->Delete(c.get(), req, &resp);
  return done("delete container " + id, s);
}

Result<uint32_t> Client::createTask(const std::string& nsName, const std::string& id, const std::vector<Mount>& rootfs,
                                    const Stdio& io) {
  auto& stub = impl_->tasks;
  tasks::CreateTaskRequest req;
  req.set_container_id(id);
  for (const auto& m : rootfs) toProto(m, req.add_rootfs());
  req.set_stdout(io.out);
  req.set_stderr(io.err);
  tasks::CreateTaskResponse resp;
  auto c = context(nsName);
  auto s = stub->Create(c.get(), req, &resp);
  if (!s.ok()) return failed<uint32_t>("create task " + id, s);
  return ok(resp.pid());
}

Result<uint32_t> Client::start(const std::string& nsName, const std::string& id, const std::string& execId) {
  auto& stub = impl_->tasks;
  tasks::StartRequest req;
  req.set_container_id(id);
  req.set_exec_id(execId);
  tasks::StartResponse resp;
  auto c = context(nsName);
  auto s = stub->Start(c.get(), req, &resp);
  if (!s.ok()) return failed<uint32_t>("start " + id + (execId.empty() ? "" : " exec " + execId), s);
  return ok(resp.pid());
}

Result<std::optional<Client::Process>> Client::process(const std::string& nsName, const std::string& id,
                                                       const std::string& execId) {
  using R = Result<std::optional<Process>>;
  auto& stub = impl_->tasks;
  tasks::GetRequest req;
  req.set_container_id(id);
  req.set_exec_id(execId);
  tasks::GetResponse resp;
  auto c = context(nsName);
  auto s = stub->Get(c.get(), req, &resp);
  if (notFound(s)) return R::ok(std::nullopt);
  if (!s.ok()) return failed<std::optional<Process>>("get task " + id, s);
  Process p;
  switch (resp.process().status()) {
    case ::containerd::v1::types::CREATED: p.status = Process::Status::Created; break;
    case ::containerd::v1::types::RUNNING: p.status = Process::Status::Running; break;
    case ::containerd::v1::types::STOPPED: p.status = Process::Status::Stopped; break;
    case ::containerd::v1::types::PAUSED:
    case ::containerd::v1::types::PAUSING: p.status = Process::Status::Paused; break;
    default: p.status = Process::Status::Unknown; break;
  }
  p.pid = resp.process().pid();
  p.exitStatus = resp.process().exit_status();
  return R::ok(p);
}

Result<bool> Client::kill(const std::string& nsName, const std::string& id, int signal, bool all,
                          const std::string& execId) {
  auto& stub = impl_->tasks;
  tasks::KillRequest req;
  req.set_container_id(id);
  req.set_exec_id(execId);
  req.set_signal(static_cast<uint32_t>(signal));
  req.set_all(all);
  google::protobuf::Empty resp;
  auto c = context(nsName);
  auto s = stub->Kill(c.get(), req, &resp);
  return done("kill " + id, s);
}

Result<bool> Client::deleteTask(const std::string& nsName, const std::string& id) {
  auto& stub = impl_->tasks;
  tasks::DeleteTaskRequest req;
  req.set_container_id(id);
  tasks::DeleteResponse resp;
  auto c = context(nsName);
  auto s = stub->Delete(c.get(), req, &resp);
  return done("delete task " + id, s);
}

Result<bool> Client::exec(const std::string& nsName, const std::string& id, const std::string& execId,
                          const std::string& processJson, const Stdio& io) {
  auto& stub = impl_->tasks;
  tasks::ExecProcessRequest req;
  req.set_container_id(id);
  req.set_exec_id(execId);
  req.set_stdout(io.out);
  req.set_stderr(io.err);
  req.mutable_spec()->set_type_url("types.containerd.io/opencontainers/runtime-spec/1/Process");
  req.mutable_spec()->set_value(processJson);
  google::protobuf::Empty resp;
  auto c = context(nsName);
  auto s = stub->Exec(c.get(), req, &resp);
  if (!s.ok()) return failed<bool>("exec in " + id, s);
  return ok(true);
}

Result<bool> Client::deleteProcess(const std::string& nsName, const std::string& id, const std::string& execId) {
  auto& stub = impl_->tasks;
  tasks::DeleteProcessRequest req;
  req.set_container_id(id);
  req.set_exec_id(execId);
  tasks::DeleteResponse resp;
  auto c = context(nsName);
  auto s = stub->DeleteProcess(c.get(), req, &resp);
  return done("delete exec " + execId + " of " + id, s);
}

void Client::watch(const std::string& filter, const std::function<void(const std::string&)>& onEvent) {
  auto& stub = impl_->events;
  for (;;) {
    grpc::ClientContext c;  // no deadline: a subscription lasts
    {
      std::lock_guard<std::mutex> g(impl_->watchMu);
      if (impl_->stopWatching) return;
      impl_->watching = &c;
    }
    events::SubscribeRequest req;
    req.add_filters(filter);
    auto reader = stub->Subscribe(&c, req);
    events::Envelope e;
    while (reader->Read(&e)) onEvent(e.topic());
    reader->Finish();
    {
      std::lock_guard<std::mutex> g(impl_->watchMu);
      impl_->watching = nullptr;
      if (impl_->stopWatching) return;
    }
    // containerd went away (a restart): subscribe again shortly. Events missed meanwhile
    // are covered by the caller's polling.
    onEvent("");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

void Client::stopWatching() {
  std::lock_guard<std::mutex> g(impl_->watchMu);
  impl_->stopWatching = true;
  if (impl_->watching) impl_->watching->TryCancel();
}

Result<std::optional<Client::Usage>> Client::metrics(const std::string& nsName, const std::string& id) {
  using R = Result<std::optional<Usage>>;
  auto& stub = impl_->tasks;
  tasks::MetricsRequest req;
  req.add_filters("id==" + id);
  tasks::MetricsResponse resp;
  auto c = context(nsName);
  auto s = stub->Metrics(c.get(), req, &resp);
  if (!s.ok()) return failed<std::optional<Usage>>("metrics of " + id, s);
  for (const auto& m : resp.metrics()) {
    if (m.id() != id) continue;
    const auto& any = m.data();
    Usage u;
    auto typeIs = [&](const std::string& name) {
      return any.type_url().size() >= name.size() && any.type_url().compare(any.type_url().size() - name.size(), name.size(), name) == 0;
    };
    if (typeIs("io.containerd.cgroups.v1.Metrics")) {
      ::io::containerd::cgroups::v1::Metrics v1;
      if (!v1.ParseFromString(any.value())) return R::fail("containerd: metrics of " + id + ": cannot decode " + any.type_url());
      u.cpuNanos = static_cast<int64_t>(v1.cpu().usage().total());
      uint64_t used = v1.memory().usage().usage(), inactive = v1.memory().total_inactive_file();
      u.memoryBytes = static_cast<int64_t>(used > inactive ? used - inactive : 0);
    } else if (typeIs("io.containerd.cgroups.v2.Metrics")) {
      ::io::containerd::cgroups::v2::Metrics v2;
      if (!v2.ParseFromString(any.value())) return R::fail("containerd: metrics of " + id + ": cannot decode " + any.type_url());
      u.cpuNanos = static_cast<int64_t>(v2.cpu().usage_usec() * 1000);
      uint64_t used = v2.memory().usage(), inactive = v2.memory().inactive_file();
      u.memoryBytes = static_cast<int64_t>(used > inactive ? used - inactive : 0);
    } else {
      return R::fail("containerd: metrics of " + id + " are of an unknown type " + any.type_url());
    }
    return R::ok(u);
  }
  return R::ok(std::nullopt);
}

}  // namespace yard::containerd
