// yardctl's client settings (common/config/client_config.h): the precedence of flags, the
// environment and the config file, and writing one master's entry without losing the others.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "common/config/client_config.h"

using namespace yard;

namespace {

struct Env {
  // Sets the variables the settings read (empty = unset) for one test, then restores them.
  explicit Env(std::map<std::string, std::string> values) {
    for (const char* k : {"YARD_CONFIG", "YARD_MASTER", "YARD_TOKEN", "YARD_CA", "YARD_HTTP", "XDG_CONFIG_HOME"}) {
      if (const char* v = std::getenv(k)) saved_[k] = v;
      ::unsetenv(k);
    }
    for (const auto& [k, v] : values)
      if (!v.empty()) ::setenv(k.c_str(), v.c_str(), 1);
  }
  ~Env() {
    for (const char* k : {"YARD_CONFIG", "YARD_MASTER", "YARD_TOKEN", "YARD_CA", "YARD_HTTP", "XDG_CONFIG_HOME"}) ::unsetenv(k);
    for (const auto& [k, v] : saved_) ::setenv(k.c_str(), v.c_str(), 1);
  }
  std::map<std::string, std::string> saved_;
};

struct Dir {
  Dir() {
    std::string t = (std::filesystem::temp_directory_path() / "yard-cc-XXXXXX").string();
    REQUIRE(mkdtemp(t.data()));
    path = t;
  }
  ~Dir() { std::filesystem::remove_all(path); }
  std::string path;
};

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

TEST_CASE("client settings: flag > environment > the master's entry > the file's defaults", "[client_config]") {
  Dir d;
  std::string file = d.path + "/config.toml";
  write(file, R"(
master = "10.0.0.1:7700"
token = "top-token"
ca = "top-ca.pem"
http = "10.0.0.9:7443"
[masters."10.0.0.1:7700"]
token = "own-token"
[masters."10.0.0.2:7700"]
token = "other-token"
ca = "/abs/other.pem"
http = "10.0.0.2:7780"
)");
  {
    Env env({{"YARD_CONFIG", file}});
    auto s = config::resolveClientSettings("", "", "");
    REQUIRE(s);
    CHECK(s.value().master == "10.0.0.1:7700");
    CHECK(s.value().token == "own-token");                 // the master's entry
    CHECK(s.value().ca == d.path + "/top-ca.pem");         // the default, relative to the file
    CHECK(s.value().configPath == file);
    auto other = config::resolveClientSettings("10.0.0.2:7700", "", "");
    CHECK(other.value().token == "other-token");
    CHECK(other.value().ca == "/abs/other.pem");
    CHECK(other.value().http == "10.0.0.2:7780");  // the entry's HTTP API (the Python client's)
    CHECK(s.value().http == "10.0.0.9:7443");      // the file's default
    auto unknown = config::resolveClientSettings("10.0.0.3:7700", "", "");
    CHECK(unknown.value().token == "top-token");
    CHECK(unknown.value().http == "10.0.0.9:7443");
    // A list of masters: the first address with an entry of its own (docs/yardctl.md).
    auto list = config::resolveClientSettings("10.0.0.3:7700,10.0.0.2:7700,10.0.0.1:7700", "", "");
    CHECK(list.value().token == "other-token");
    CHECK(list.value().ca == "/abs/other.pem");
    CHECK(config::resolveClientSettings("10.0.0.3:7700,10.0.0.4:7700", "", "").value().token == "top-token");
    auto flags = config::resolveClientSettings("10.0.0.2:7700", "flag-token", "/flag.pem");
    CHECK(flags.value().token == "flag-token");
    CHECK(flags.value().ca == "/flag.pem");
  }
  {
    Env env({{"YARD_CONFIG", file}, {"YARD_MASTER", "10.0.0.2:7700"}, {"YARD_TOKEN", "env-token"}, {"YARD_CA", "/env.pem"},
             {"YARD_HTTP", "10.0.0.2:9443"}});
    auto s = config::resolveClientSettings("", "", "");
    CHECK(s.value().master == "10.0.0.2:7700");
    CHECK(s.value().token == "env-token");
    CHECK(s.value().ca == "/env.pem");
    CHECK(s.value().http == "10.0.0.2:9443");
    CHECK(config::resolveClientSettings("", "flag", "").value().token == "flag");
  }
  {
    Env env({{"XDG_CONFIG_HOME", d.path + "/xdg"}});
    CHECK(config::clientConfigPath() == d.path + "/xdg/yard/config.toml");
    auto s = config::resolveClientSettings("", "", "");  // no file: no error, nothing set
    REQUIRE(s);
    CHECK(s.value().master.empty());
  }
}

TEST_CASE("client settings: a broken file is an error naming it and the key", "[client_config]") {
  Dir d;
  std::string file = d.path + "/config.toml";
  Env env({{"YARD_CONFIG", file}});
  write(file, "tokn = \"x\"\n");
  CHECK(config::resolveClientSettings("", "", "").error() == file + ": unknown key \"tokn\"");
  write(file, "token = 5\n");
  CHECK(config::resolveClientSettings("", "", "").error() == file + ": token: must be a string");
  write(file, "[masters.\"a:1\"]\nca = 1\n");
  CHECK(config::resolveClientSettings("", "", "").error() == file + ": masters.\"a:1\".ca: must be a string");
  write(file, "http = 7780\n");
  CHECK(config::resolveClientSettings("", "", "").error() == file + ": http: must be a string");
  write(file, "master = \n");
  CHECK_THAT(config::resolveClientSettings("", "", "").error(), Catch::StartsWith(file + ": line 1"));
}

TEST_CASE("writeMasterEntry keeps the other entries, writes 0600, refuses to clobber a broken file", "[client_config]") {
  Dir d;
  std::string file = d.path + "/sub/config.toml";
  REQUIRE(config::writeMasterEntry(file, "127.0.0.1:7700", "t1", "/ca1.pem"));
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  // Several writers at once (two dev masters starting together) lose nothing.
  std::vector<std::thread> writers;
  for (int i = 0; i < 8; ++i)
    writers.emplace_back([&, i] {
      CHECK(config::writeMasterEntry(file, "127.0.0.1:" + std::to_string(8000 + i), "t" + std::to_string(i), ""));
    });
  for (auto& w : writers) w.join();
  REQUIRE(config::writeMasterEntry(file, "127.0.0.1:7700", "t2", "/ca2.pem", "127.0.0.1:7780"));  // replaced, not added
  Env env({{"YARD_CONFIG", file}});
  CHECK(config::resolveClientSettings("127.0.0.1:7700", "", "").value().http == "127.0.0.1:7780");
  CHECK(config::resolveClientSettings("127.0.0.1:8000", "", "").value().http.empty());
  CHECK(config::resolveClientSettings("127.0.0.1:7700", "", "").value().token == "t2");
  CHECK(config::resolveClientSettings("127.0.0.1:7700", "", "").value().ca == "/ca2.pem");
  for (int i = 0; i < 8; ++i)
    CHECK(config::resolveClientSettings("127.0.0.1:" + std::to_string(8000 + i), "", "").value().token ==
          "t" + std::to_string(i));
  write(file, "master = [\n");
  CHECK_THAT(config::writeMasterEntry(file, "a:1", "t", "").error(), Catch::EndsWith("(not changed)"));
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  CHECK(text == "master = [\n");
}
