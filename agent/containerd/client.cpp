#include "agent/containerd/client.h"

#include <grpcpp/grpcpp.h>

#include "github.com/containerd/containerd/api/services/containers/v1/containers.grpc.pb.h"
#include "github.com/containerd/containerd/api/services/namespaces/v1/namespace.grpc.pb.h"
#include "github.com/containerd/containerd/api/services/version/v1/version.grpc.pb.h"

namespace yard::containerd {
namespace {

namespace ns = ::containerd::services::namespaces::v1;
namespace ver = ::containerd::services::version::v1;
namespace ctr = ::containerd::services::containers::v1;

constexpr auto kCallTimeout = std::chrono::seconds(10);

template <typename T>
Result<T> failed(const std::string& what, const grpc::Status& s) {
  return Result<T>::fail("containerd: " + what + ": " + s.error_message() + " (gRPC code " +
                         std::to_string(static_cast<int>(s.error_code())) + ")");
}

// Every call names its containerd namespace in metadata, as containerd's own clients do.
std::unique_ptr<grpc::ClientContext> context(const std::string& nsName = "") {
  auto c = std::make_unique<grpc::ClientContext>();
  c->set_deadline(std::chrono::system_clock::now() + kCallTimeout);
  if (!nsName.empty()) c->AddMetadata("containerd-namespace", nsName);
  return c;
}

}  // namespace

struct Client::Impl {
  std::string socket;
  std::shared_ptr<grpc::Channel> channel;
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::connect(const std::string& socketPath, std::chrono::milliseconds timeout) {
  using R = Result<std::unique_ptr<Client>>;
  auto impl = std::make_unique<Impl>();
  impl->socket = socketPath;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(16 << 20);
  impl->channel = grpc::CreateCustomChannel("unix://" + socketPath, grpc::InsecureChannelCredentials(), args);
  if (!impl->channel->WaitForConnected(std::chrono::system_clock::now() + timeout))
    return R::fail("containerd at " + socketPath + " did not answer within " + std::to_string(timeout.count()) + " ms");
  return R::ok(std::make_unique<Client>(std::move(impl)));
}

Result<std::string> Client::version() {
  auto stub = ver::Version::NewStub(impl_->channel);
  google::protobuf::Empty req;
  ver::VersionResponse resp;
  auto c = context();
  auto s = stub->Version(c.get(), req, &resp);
  if (!s.ok()) return failed<std::string>("version", s);
  return Result<std::string>::ok(resp.version() + " (revision " + resp.revision() + ")");
}

Result<bool> Client::ensureNamespace(const std::string& name) {
  auto stub = ns::Namespaces::NewStub(impl_->channel);
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
  auto stub = ns::Namespaces::NewStub(impl_->channel);
  ns::ListNamespacesRequest req;
  ns::ListNamespacesResponse resp;
  auto c = context();
  auto s = stub->List(c.get(), req, &resp);
  if (!s.ok()) return failed<std::vector<std::string>>("list namespaces", s);
  std::vector<std::string> out;
  for (const auto& n : resp.namespaces()) out.push_back(n.name());
  return R::ok(std::move(out));
}

Result<std::vector<std::string>> Client::containers(const std::string& nsName) {
  using R = Result<std::vector<std::string>>;
  auto stub = ctr::Containers::NewStub(impl_->channel);
  ctr::ListContainersRequest req;
  ctr::ListContainersResponse resp;
  auto c = context(nsName);
  auto s = stub->List(c.get(), req, &resp);
  if (!s.ok()) return failed<std::vector<std::string>>("list containers in " + nsName, s);
  std::vector<std::string> out;
  for (const auto& x : resp.containers()) out.push_back(x.id());
  return R::ok(std::move(out));
}

}  // namespace yard::containerd
