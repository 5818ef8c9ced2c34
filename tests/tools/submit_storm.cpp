// yard-submit-storm: submits many small jobs to a master through the real client API from
// N concurrent clients, printing each acknowledged job name on stdout as soon as the
// master acknowledges it (the crash test compares these with what survives a kill -9),
// and a summary with submissions per second on stderr.
//
//   YARD_TOKEN=... yard-submit-storm --master HOST:PORT --ca CA.pem [--clients 16] [--jobs 100] [--prefix storm]
//                                    [--rate JOBS_PER_S]
//
// --rate paces the clients together at that many submissions a second (each client at its
// share, on a fixed schedule); without it every client submits as fast as it is answered.
//
// Every connection is TLS, the master verified against --ca (its <data-dir>/ca.pem); every
// request carries the API token of --token or $YARD_TOKEN (docs/security.md).
#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

#include "common/spec/loader.h"
#include "common/tls/pki.h"
#include "common/wire/client.h"
#include "schema/api.capnp.h"

int main(int argc, char** argv) {
  CLI::App app{"yard-submit-storm: concurrent job submissions through the client API"};
  std::string master, caFile, token, prefix = "storm";
  int clients = 16, jobs = 100;
  double rate = 0;
  app.add_option("--master", master, "Master client address")->required();
  app.add_option("--ca", caFile, "The cluster CA certificate (the master's <data-dir>/ca.pem)")->required();
  app.add_option("--token", token, "API token (else $YARD_TOKEN; on the command line every process can read it)");
  app.add_option("--clients", clients, "Concurrent clients (one connection each)");
  app.add_option("--jobs", jobs, "Jobs per client");
  app.add_option("--prefix", prefix, "Job name prefix");
  app.add_option("--rate", rate, "Submissions per second, all clients together (default: as fast as answered)")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  if (token.empty())
    if (const char* env = std::getenv("YARD_TOKEN")) token = env;
  auto caPem = yard::tls::readFile(caFile);
  if (!caPem) {
    std::cerr << "yard-submit-storm: --ca: " << caPem.error() << "\n";
    return 2;
  }
  auto tls = yard::wire::makeClientTls(caPem.value(), nullptr, yard::tls::kMasterName);
  if (!tls) {
    std::cerr << "yard-submit-storm: --ca " << caFile << ": " << tls.error() << "\n";
    return 2;
  }

  std::mutex outMu;  // guards stdout lines
  std::atomic<int> acked{0}, failed{0};
  std::atomic<bool> refusalShown{false};
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto client = yard::wire::FrameClient::connect(master, tls.value());
      if (!client) {
        std::lock_guard<std::mutex> lock(outMu);
        std::cerr << "yard-submit-storm: " << client.error() << "\n";
        failed += jobs;
        return;
      }
      auto every = rate > 0 ? std::chrono::duration<double>(clients / rate) : std::chrono::duration<double>(0);
      auto due = std::chrono::steady_clock::now() + every * c / clients;  // clients staggered
      // The spec is read once; each job is a copy under its own name (the client's YAML
      // parsing is not what this measures).
      auto loaded = yard::spec::loadJobSpec(
          "name: storm-job\ntasks:\n  - name: main\n    kind: container-job\n    container:\n"
          "      image: host\n      resources: { cpu: 100m, memory: 64Mi }\n      command: [sh, -c, 'echo hi']\n"
          "      env: [ { name: PAD, value: \"" + std::string(512, 'x') + "\" } ]\n");
      if (!loaded.ok()) {
        std::cerr << loaded.errors[0].str() << "\n";
        std::exit(2);
      }
      for (int j = 0; j < jobs; ++j) {
        if (rate > 0) {
          std::this_thread::sleep_until(due);
          due += std::chrono::duration_cast<std::chrono::steady_clock::duration>(every);
        }
        std::string name = prefix + "-" + std::to_string(c) + "-" + std::to_string(j);
        capnp::MallocMessageBuilder m;
        auto req = m.initRoot<yard::api::Request>();
        req.setId(static_cast<uint64_t>(j));
        req.setToken(token);
        req.setJobSubmit(loaded.job());
        req.getJobSubmit().setName(name);
        auto resp = client.value()->call(m);
        if (!resp) {  // the master went away: stop this client
          failed += jobs - j;
          return;
        }
        auto r = resp.value()->root<yard::api::Response>();
        if (r.isError()) {
          ++failed;
          if (!refusalShown.exchange(true)) {  // the first refusal says why (a missing token, say)
            std::lock_guard<std::mutex> lock(outMu);
            std::cerr << "yard-submit-storm: " << name << ": " << r.getError().getMessage().cStr() << "\n";
          }
          continue;
        }
        ++acked;
        std::lock_guard<std::mutex> lock(outMu);
        std::printf("%s\n", name.c_str());
        std::fflush(stdout);
      }
    });
  }
  for (auto& t : threads) t.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "clients=%d acknowledged=%d failed=%d seconds=%.3f jobs_per_second=%.1f\n", clients,
               acked.load(), failed.load(), secs, acked.load() / secs);
  return failed.load() == 0 ? 0 : 1;
}
