#include "common/config/client_config.h"

#include "common/tls/pki.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/config/toml_config.h"
#include "common/wire/address_list.h"

namespace yard::config {
namespace {

namespace fs = std::filesystem;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

Result<std::string> readWhole(const std::string& path, bool& exists) {
  std::ifstream in(path, std::ios::binary);
  exists = in.is_open();
  if (!exists) {
    if (errno == ENOENT || errno == ENOTDIR) return Result<std::string>::ok("");
    return Result<std::string>::fail(path + ": cannot read: " + std::strerror(errno));
  }
  std::ostringstream s;
  s << in.rdbuf();
  return Result<std::string>::ok(s.str());
}

// Reads `key` of `t` (a string) into `out`; "" or the error naming `where`.
std::string stringKey(const toml::table& t, const char* key, const std::string& where, std::string& out) {
  const toml::node* n = t.get(key);
  if (!n) return "";
  auto v = n->value<std::string>();
  if (!v) return where + key + ": must be a string";
  out = *v;
  return "";
}

struct Entry {
  std::string token, ca, http;
};

struct FileSettings {
  std::string master;
  Entry defaults;
  std::map<std::string, Entry> masters;
};

Result<FileSettings> parseFile(const std::string& path, const std::string& text) {
  using R = Result<FileSettings>;
  auto parsed = parseToml(text, path);
  if (!parsed) return R::fail(parsed.error());
  const toml::table& root = parsed.value();
  FileSettings f;
  if (auto bad = unknownKey(root, {"master", "token", "ca", "http", "masters"}); !bad.empty()) return R::fail(path + ": " + bad);
  std::string why = stringKey(root, "master", "", f.master);
  if (why.empty()) why = stringKey(root, "token", "", f.defaults.token);
  if (why.empty()) why = stringKey(root, "ca", "", f.defaults.ca);
  if (why.empty()) why = stringKey(root, "http", "", f.defaults.http);
  if (!why.empty()) return R::fail(path + ": " + why);
  if (const toml::node* m = root.get("masters")) {
    const toml::table* masters = m->as_table();
    if (!masters) return R::fail(path + ": masters: must be a table of [masters.\"HOST:PORT\"] entries");
    for (const auto& [k, v] : *masters) {
      std::string where = "masters.\"" + std::string(k.str()) + "\".";
      const toml::table* e = v.as_table();
      if (!e) return R::fail(path + ": " + where.substr(0, where.size() - 1) + ": must be a table (token, ca, http)");
      if (auto bad = unknownKey(*e, {"token", "ca", "http"}); !bad.empty()) return R::fail(path + ": " + where + bad);
      Entry entry;
      why = stringKey(*e, "token", where, entry.token);
      if (why.empty()) why = stringKey(*e, "ca", where, entry.ca);
      if (why.empty()) why = stringKey(*e, "http", where, entry.http);
      if (!why.empty()) return R::fail(path + ": " + why);
      f.masters[std::string(k.str())] = entry;
    }
  }
  return R::ok(std::move(f));
}

// A relative CA path in the file is relative to the file.
std::string caFromFile(const std::string& configPath, const std::string& ca) {
  if (ca.empty() || ca[0] == '/') return ca;
  return (fs::path(configPath).parent_path() / ca).string();
}

Result<bool> fail(std::string why) { return Result<bool>::fail(std::move(why)); }

}  // namespace

std::string clientConfigPath() {
  if (std::string p = env("YARD_CONFIG"); !p.empty()) return p;
  if (std::string x = env("XDG_CONFIG_HOME"); !x.empty()) return x + "/yard/config.toml";
  if (std::string h = env("HOME"); !h.empty()) return h + "/.config/yard/config.toml";
  return "";
}

Result<ClientSettings> resolveClientSettings(const std::string& flagMaster, const std::string& flagToken,
                                             const std::string& flagCa) {
  using R = Result<ClientSettings>;
  ClientSettings s;
  s.configPath = clientConfigPath();
  FileSettings file;
  if (!s.configPath.empty()) {
    bool exists = false;
    auto text = readWhole(s.configPath, exists);
    if (!text) return R::fail(text.error());
    if (exists) {
      auto parsed = parseFile(s.configPath, text.value());
      if (!parsed) return R::fail(parsed.error());
      file = std::move(parsed).value();
    }
  }
  auto first = [](std::initializer_list<std::string> values) {
    for (const auto& v : values)
      if (!v.empty()) return v;
    return std::string();
  };
  s.master = first({flagMaster, env("YARD_MASTER"), file.master});
  Entry own;
  // A list of masters ("A,B,C") uses its own entry, else that of the first address with one:
  // the masters of a cluster share its CA and tokens.
  if (auto it = file.masters.find(s.master); it != file.masters.end()) {
    own = it->second;
  } else {
    for (const std::string& address : wire::splitAddressList(s.master)) {
      if (auto at = file.masters.find(address); at != file.masters.end()) {
        own = at->second;
        break;
      }
    }
  }
  s.token = first({flagToken, env("YARD_TOKEN"), own.token, file.defaults.token});
  std::string fileCa = caFromFile(s.configPath, first({own.ca, file.defaults.ca}));
  s.ca = first({flagCa, env("YARD_CA"), fileCa});
  s.http = first({env("YARD_HTTP"), own.http, file.defaults.http});
  return R::ok(std::move(s));
}

Result<bool> writeMasterEntry(const std::string& path, const std::string& master, const std::string& token,
                              const std::string& ca, const std::string& http) {
  if (path.empty()) return fail("no config file path: set YARD_CONFIG or HOME");
  if (master.empty()) return fail(path + ": no master address to write an entry for");
  std::error_code ec;
  fs::path dir = fs::path(path).parent_path();
  if (!dir.empty()) {
    fs::create_directories(dir, ec);
    if (ec) return fail(dir.string() + ": cannot create: " + ec.message());
  }
  std::string lockPath = path + ".lock";
  int lock = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0) return fail(lockPath + ": cannot open: " + std::strerror(errno));
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }  // closing drops the flock
  } unlock{lock};
  while (::flock(lock, LOCK_EX) != 0)
    if (errno != EINTR) return fail(lockPath + ": cannot lock: " + std::strerror(errno));

  bool exists = false;
  auto text = readWhole(path, exists);
  if (!text) return fail(text.error());
  toml::table root;
  if (exists) {
    auto parsed = parseToml(text.value(), path);
    if (!parsed) return fail(parsed.error() + " (not changed)");
    root = std::move(parsed).value();
  }
  toml::table* masters = root["masters"].as_table();
  if (!masters) {
    if (root.contains("masters")) return fail(path + ": masters: must be a table (not changed)");
    root.insert("masters", toml::table{});
    masters = root["masters"].as_table();
  }
  toml::table entry;
  if (!token.empty()) entry.insert("token", token);
  if (!ca.empty()) entry.insert("ca", ca);
  if (!http.empty()) entry.insert("http", http);
  masters->insert_or_assign(master, std::move(entry));
  std::ostringstream out;
  out << root << "\n";
  std::string body = out.str();

  // Atomic and 0600 from its first byte (common/tls/pki.h).
  if (auto written = tls::writeSecretFile(path, body); !written) return fail(written.error());
  return Result<bool>::ok(true);
}

}  // namespace yard::config
