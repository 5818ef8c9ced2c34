// The GPU topology matrix (common/topology/gpu_topology.h): nvidia-smi's `topo -m` output read
// from the fixtures in configs/topology/, and the choice of GPUs by their links, as tables.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "common/topology/gpu_topology.h"

using namespace yard::topology;

namespace {

GpuTopology fixture(const std::string& name) {
  std::ifstream in(std::string(YARD_SOURCE_DIR) + "/configs/topology/" + name);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  ParsedTopology p = parseNvidiaSmiTopo(text.str());
  INFO(p.error);
  REQUIRE(p.topology.has_value());
  return *p.topology;
}

std::vector<uint32_t> except(const GpuTopology& t, std::vector<uint32_t> used) {
  std::vector<uint32_t> out;
  for (uint32_t g : t.gpus)
    if (std::find(used.begin(), used.end(), g) == used.end()) out.push_back(g);
  return out;
}

// The worst link among the chosen GPUs; "-" for one GPU.
std::string worstOf(const GpuTopology& t, const std::vector<uint32_t>& gpus) {
  std::string w = worstLinkText(t, gpus);
  return w.empty() ? "-" : w;
}

}  // namespace

TEST_CASE("topology: the fixtures read as their boxes", "[topology]") {
  GpuTopology dgx = fixture("dgx-a100-8gpu-nvswitch.txt");
  REQUIRE(dgx.gpus.size() == 8);
  CHECK(linkText(dgx.link[0][7], dgx.nvlinks[0][7]) == "NV12");
  CHECK(dgx.numa[0] == 3);
  CHECK(dgx.cpus[0] == "48-63,176-191");

  GpuTopology pcie = fixture("pcie-8gpu-2socket.txt");
  REQUIRE(pcie.gpus.size() == 8);
  CHECK(linkText(pcie.link[0][1]) == "PIX");
  CHECK(linkText(pcie.link[0][2]) == "NODE");
  CHECK(linkText(pcie.link[3][4]) == "SYS");
  CHECK(pcie.numa[5] == 1);
  CHECK(pcie.cpus[5] == "16-31,48-63");

  GpuTopology pairs = fixture("nvlink-pairs-4gpu.txt");
  REQUIRE(pairs.gpus.size() == 4);
  CHECK(linkText(pairs.link[2][3], pairs.nvlinks[2][3]) == "NV4");
  CHECK(linkText(pairs.link[1][2]) == "SYS");
}

TEST_CASE("topology: 2- 4- and 8-GPU requests get NVLinked or same-switch sets when one is free", "[topology]") {
  GpuTopology pcie = fixture("pcie-8gpu-2socket.txt");
  GpuTopology pairs = fixture("nvlink-pairs-4gpu.txt");
  GpuTopology dgx = fixture("dgx-a100-8gpu-nvswitch.txt");
  struct Row {
    const char* what;
    const GpuTopology* t;
    std::vector<uint32_t> used;
    size_t k;
    std::vector<uint32_t> want;
    std::string worst;
  };
  std::vector<Row> rows = {
      {"pcie: 2 of 8 take a switch pair", &pcie, {}, 2, {0, 1}, "PIX"},
      {"pcie: 2 after GPU0 is taken skip the broken pair", &pcie, {0}, 2, {2, 3}, "PIX"},
      {"pcie: 1 after GPU0 takes its orphaned partner", &pcie, {0}, 1, {1}, "-"},
      {"pcie: 4 stay on one socket", &pcie, {}, 4, {0, 1, 2, 3}, "NODE"},
      {"pcie: 4 after 0 and 2 are taken go to the other socket", &pcie, {0, 2}, 4, {4, 5, 6, 7}, "NODE"},
      {"pcie: 2 with only broken pairs left cross no socket", &pcie, {0, 2, 4, 6}, 2, {1, 3}, "NODE"},
      {"pcie: 8 take all", &pcie, {}, 8, {0, 1, 2, 3, 4, 5, 6, 7}, "SYS"},
      {"pairs: 2 take an NVLink pair", &pairs, {}, 2, {0, 1}, "NV4"},
      {"pairs: 2 after GPU1 is taken take the other pair", &pairs, {1}, 2, {2, 3}, "NV4"},
      {"pairs: 1 after GPU2 takes 3 and leaves the pair whole", &pairs, {2}, 1, {3}, "-"},
      {"dgx: 4 of 8 are all NVSwitch", &dgx, {1, 6}, 4, {0, 2, 3, 4}, "NV12"},
  };
  for (const Row& r : rows) {
    DYNAMIC_SECTION(r.what) {
      std::vector<uint32_t> got = chooseGpus(*r.t, except(*r.t, r.used), r.k);
      CHECK(got == r.want);
      CHECK(worstOf(*r.t, got) == r.worst);
    }
  }
}

TEST_CASE("topology: GPUs the matrix does not know are given last", "[topology]") {
  GpuTopology pairs = fixture("nvlink-pairs-4gpu.txt");
  CHECK(chooseGpus(pairs, {0, 1, 9}, 2) == std::vector<uint32_t>{0, 1});
  CHECK(chooseGpus(pairs, {0, 9}, 2) == std::vector<uint32_t>{0, 9});
  CHECK(chooseGpus(pairs, {0}, 2) == std::vector<uint32_t>{0});  // fewer than asked: what is free
  CHECK(chooseGpus(GpuTopology{}, {3, 1, 2}, 2) == std::vector<uint32_t>{1, 2});
}

TEST_CASE("topology: a malformed matrix is refused naming the line and the column", "[topology]") {
  CHECK(parseNvidiaSmiTopo("hello\n").error == "no GPU matrix: no line starts its columns with GPU0");
  std::string bad = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV2\t0-3\nGPU1\tFAST\t X \t0-3\n";
  CHECK(parseNvidiaSmiTopo(bad).error ==
        "line 3: GPU1 column GPU0: \"FAST\" is not a link (NV#, PIX, PXB, PHB, NODE, SYS)");
  std::string oneWay = "\tGPU0\tGPU1\nGPU0\t X \tNV2\nGPU1\tSYS\t X \n";
  CHECK(parseNvidiaSmiTopo(oneWay).error == "GPU0 and GPU1 disagree: NV2 one way, SYS the other");
  std::string missing = "\tGPU0\tGPU1\nGPU0\t X \tNV2\n";
  CHECK(parseNvidiaSmiTopo(missing).error == "GPU1 has a column but no row");
  std::string cpus = "\tGPU0\tCPU Affinity\nGPU0\t X \t0-x\n";
  CHECK(parseNvidiaSmiTopo(cpus).error == "line 2: GPU0: CPU affinity \"0-x\" is not a CPU list");
  // An old driver's SOC reads as SYS; a one-GPU box has a matrix of one.
  auto old = parseNvidiaSmiTopo("\tGPU0\tGPU1\nGPU0\t X \tSOC\nGPU1\tSOC\t X \n");
  REQUIRE(old.topology);
  CHECK(old.topology->link[0][1] == Link::SYS);
  auto one = parseNvidiaSmiTopo("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-15\t0\n");
  REQUIRE(one.topology);
  CHECK(one.topology->numa[0] == 0);
}

TEST_CASE("topology: CPU lists", "[topology]") {
  CHECK(parseCpuList("0-3,8,10-11") == std::vector<uint32_t>{0, 1, 2, 3, 8, 10, 11});
  CHECK(parseCpuList("") == std::vector<uint32_t>{});
  CHECK_FALSE(parseCpuList("3-1").has_value());
  CHECK_FALSE(parseCpuList("a").has_value());
  CHECK(cpuListText({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
  CHECK(cpuListText({5}) == "5");
}

TEST_CASE("topology: CUDA_VISIBLE_DEVICES order follows the links", "[topology]") {
  GpuTopology pcie = fixture("pcie-8gpu-2socket.txt");
  CHECK(orderByLinks(pcie, {3, 2, 1, 0}) == std::vector<uint32_t>{0, 1, 2, 3});
  // A box whose NVLink pairs are (0,2) and (1,3): ring neighbours share them.
  auto crossed = parseNvidiaSmiTopo(
      "\tGPU0\tGPU1\tGPU2\tGPU3\n"
      "GPU0\t X \tSYS\tNV4\tSYS\n"
      "GPU1\tSYS\t X \tSYS\tNV4\n"
      "GPU2\tNV4\tSYS\t X \tSYS\n"
      "GPU3\tSYS\tNV4\tSYS\t X \n");
  REQUIRE(crossed.topology);
  CHECK(orderByLinks(*crossed.topology, {0, 1, 2, 3}) == std::vector<uint32_t>{0, 2, 1, 3});
  CHECK(chooseGpus(*crossed.topology, {0, 1, 2, 3}, 2) == std::vector<uint32_t>{0, 2});
  CHECK(worstLinkText(*crossed.topology, {0, 2}) == "NV4");
  CHECK(worstLinkText(*crossed.topology, {0, 1, 2}) == "SYS");
  CHECK(worstLinkText(*crossed.topology, {0}) == "");
  CHECK(worstLinkText(*crossed.topology, {0, 9}) == "");
  CHECK(crossed.topology->fingerprint != pcie.fingerprint);
}

TEST_CASE("topology: a replica's cpuset is its GPUs' NUMA nodes", "[topology]") {
  GpuTopology pcie = fixture("pcie-8gpu-2socket.txt");
  auto one = bindingFor(pcie, {2, 3});
  CHECK(one.cpus == "0-15,32-47");
  CHECK(one.mems == "0");
  auto both = bindingFor(pcie, {3, 4});
  CHECK(both.cpus == "0-63");
  CHECK(both.mems == "0-1");
  CHECK(bindingFor(pcie, {9}).cpus == "");
  auto bare = parseNvidiaSmiTopo("\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU1\tPIX\t X \n");
  REQUIRE(bare.topology);
  CHECK(bindingFor(*bare.topology, {0}).cpus == "");  // no CPU affinity column
}
