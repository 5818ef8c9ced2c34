// yard_store_bench: how many jobs per second the store makes durable (each write = 1 job
// row with a 2 KiB spec + 3 task rows + 1 event, committed with fsync), with one writer
// calling writeSync in a loop versus N writers at once. The ratio N/1 is what group commit
// buys. Run on the disk the master will use (--dir); tmpfs makes fsync free and the numbers
// meaningless.
//
//   yard_store_bench [--dir DIR] [--seconds S] [--runs R] [--threads N]

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "master/store/store.h"

namespace fs = std::filesystem;
using namespace yard::store;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string dir;  // empty: a fresh directory under /var/tmp
  double seconds = 2.0;
  int runs = 3;
  int threads = 16;
};

struct Sample {
  double jobsPerSec;
  double txPerSec;
};

void insertJob(Tx& tx, const std::string& name, const std::string& spec) {
  JobRecord j;
  j.name = name;
  j.queue = "bench";
  j.state = yard::JobState::Queued;
  j.spec = spec;
  j.submittedAt = 1;
  if (!tx.insertJob(j).isOk()) return;
  for (int i = 0; i < 3; ++i) {
    TaskRecord t;
    t.jobId = j.id;
    t.name = "task-" + std::to_string(i);
    t.state = yard::TaskState::Waiting;
    tx.insertTask(t);
  }
  EventRecord e;
  e.jobId = j.id;
  e.type = "Queued";
  e.reason = "submitted";
  tx.appendEvent(e);
}

// One measurement on a fresh database: `writers` threads each call writeSync in a loop.
Sample measure(const std::string& path, int writers, double seconds) {
  fs::remove(path);
  auto opened = Store::open(path);
  if (!opened.isOk()) {
    std::fprintf(stderr, "%s\n", opened.error().c_str());
    std::exit(1);
  }
  auto store = std::move(opened).value();
  const std::string spec(2048, 'x');
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> done{0};
  std::vector<std::thread> threads;
  auto start = Clock::now();
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        std::string name = "b-" + std::to_string(w) + "-" + std::to_string(i);
        auto r = store->writeSync([&](Tx& tx) { insertJob(tx, name, spec); });
        if (!r.isOk()) {
          std::fprintf(stderr, "write failed: %s\n", r.error().c_str());
          std::exit(1);
        }
        done.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  Stats s = store->stats();
  return Sample{static_cast<double>(done.load()) / elapsed,
                static_cast<double>(s.transactions) / elapsed};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool hasValue = i + 1 < argc;
    if (a == "--dir" && hasValue) o.dir = argv[++i];
    else if (a == "--seconds" && hasValue) o.seconds = std::atof(argv[++i]);
    else if (a == "--runs" && hasValue) o.runs = std::atoi(argv[++i]);
    else if (a == "--threads" && hasValue) o.threads = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--dir DIR] [--seconds S] [--runs R] [--threads N]\n",
                   argv[0]);
      std::exit(2);
    }
  }
  if (o.runs < 1 || o.threads < 1 || o.seconds <= 0) {
    std::fprintf(stderr, "--runs, --threads and --seconds must be positive\n");
    std::exit(2);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  bool ownDir = o.dir.empty();
  if (ownDir) {
    std::string tmpl = "/var/tmp/yard-store-bench-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::perror("mkdtemp");
      return 1;
    }
    o.dir = tmpl;
  }
  std::string path = (fs::path(o.dir) / "bench.db").string();
  std::printf("store bench: each write = 1 job (2048-byte spec) + 3 tasks + 1 event;"
              " WAL, synchronous=FULL\n");
  std::printf("database: %s; %.1f s per measurement, %d runs\n\n", path.c_str(), o.seconds,
              o.runs);
  std::printf("%-4s %8s %12s %10s %8s\n", "run", "writers", "jobs/s", "tx/s", "jobs/tx");
  std::vector<double> one, many, oneTx, manyTx;
  for (int run = 1; run <= o.runs; ++run) {
    for (int writers : {1, o.threads}) {
      Sample s = measure(path, writers, o.seconds);
      std::printf("%-4d %8d %12.0f %10.0f %8.1f\n", run, writers, s.jobsPerSec, s.txPerSec,
                  s.jobsPerSec / s.txPerSec);
      (writers == 1 ? one : many).push_back(s.jobsPerSec);
      (writers == 1 ? oneTx : manyTx).push_back(s.txPerSec);
    }
  }
  std::printf("\nmedian  1 writer : %8.0f jobs/s  %8.0f tx/s\n", median(one), median(oneTx));
  std::printf("median %2d writers: %8.0f jobs/s  %8.0f tx/s\n", o.threads, median(many),
              median(manyTx));
  std::printf("ratio %d/1: %.1fx\n", o.threads, median(many) / median(one));
  fs::remove(path);
  if (ownDir) fs::remove_all(o.dir);
  return 0;
}
