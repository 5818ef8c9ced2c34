// The container replica's OCI spec (agent/drivers/containerd/oci_spec.h): what runs, with what environment and
// identity, and the safe defaults every container gets. The spec is checked as JSON text;
// runc itself runs it in tests/e2e/containers_test.sh.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/drivers/containerd/oci_spec.h"

using namespace yard;
using namespace yard::agent;

namespace {

ReplicaSpec replica() {
  ReplicaSpec s;
  s.job = "j";
  s.task = "t";
  s.role = "run";
  s.image = "127.0.0.1:5000/yard/busybox:1";
  s.argv = {"sh", "-c", "echo hi"};
  s.env = {{"RANK", "0"}, {"PATH", "/opt/bin:/bin"}};
  s.memoryBytes = 512ll << 20;
  return s;
}

bool has(const std::string& json, const std::string& part) { return json.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("oci: the task's command replaces the image's - env merges by name, the replica's last") {
  ImageDefaults image;
  image.env = {"PATH=/usr/bin", "LANG=C.UTF-8", "RANK=9"};
  image.entrypoint = {"/entry"};
  image.cmd = {"serve"};
  image.workingDir = "/work";
  auto p = containerProcess(replica(), image);
  REQUIRE(p.isOk());
  CHECK(p.value().argv == std::vector<std::string>{"sh", "-c", "echo hi"});
  CHECK(p.value().env == std::vector<std::string>{"PATH=/opt/bin:/bin", "LANG=C.UTF-8", "RANK=0"});
  CHECK(p.value().cwd == "/work");
  CHECK(p.value().uid == 0);

  ReplicaSpec bare = replica();
  bare.argv.clear();
  bare.env.clear();
  bare.workingDir = "/data";
  auto q = containerProcess(bare, {{}, {"/entry"}, {"serve", "--port", "1"}, "", "1000:100"});
  REQUIRE(q.isOk());
  CHECK(q.value().argv == std::vector<std::string>{"/entry", "serve", "--port", "1"});
  CHECK(q.value().env.front().rfind("PATH=/usr/local/sbin:", 0) == 0);  // a PATH even when nobody gives one
  CHECK(q.value().cwd == "/data");
  CHECK(q.value().uid == 1000);
  CHECK(q.value().gid == 100);
}

TEST_CASE("oci: what cannot run is an error naming the field and the value") {
  ReplicaSpec bare = replica();
  bare.argv.clear();
  CHECK(containerProcess(bare, {}).error() ==
        "command: the task gives none and image 127.0.0.1:5000/yard/busybox:1 has no entrypoint or cmd");
  ReplicaSpec rel = replica();
  rel.workingDir = "data";
  CHECK(containerProcess(rel, {}).error() == "workingDir: \"data\" must be an absolute path");
  CHECK(containerProcess(replica(), {{}, {}, {}, "", "www-data"}).error() ==
        "image user \"www-data\": the uid must be numeric (user names are not looked up in the image)");
}

TEST_CASE("oci: the spec has runc's safe defaults, the host network, the mounts and the cgroup") {
  ReplicaSpec s = replica();
  s.mounts = {{"/srv/imagenet", "/data", true}, {"/srv/out", "/out", false}};
  auto p = containerProcess(s, {});
  REQUIRE(p.isOk());
  OciOptions o;
  o.cgroupsPath = "/yard/node-a/12-0";
  o.extraMounts = {{"/etc/hosts", "/etc/hosts", true}};
  o.devices = {{"/dev/nvidia0", 'c', 195, 0}};
  std::string json = ociSpecJson(s, p.value(), o);
  CHECK(has(json, R"("args":["sh","-c","echo hi"])"));
  CHECK(has(json, R"("noNewPrivileges":true)"));
  CHECK(has(json, R"("bounding":["CAP_CHOWN","CAP_DAC_OVERRIDE","CAP_FSETID","CAP_FOWNER","CAP_MKNOD","CAP_SETGID","CAP_SETUID","CAP_SETFCAP","CAP_SETPCAP","CAP_SYS_CHROOT","CAP_KILL","CAP_AUDIT_WRITE"])"));
  CHECK_FALSE(has(json, "CAP_SYS_ADMIN"));
  CHECK(has(json, R"("namespaces":[{"type":"pid"},{"type":"ipc"},{"type":"uts"},{"type":"mount"}])"));
  CHECK_FALSE(has(json, R"("type":"network")"));  // the host's network
  CHECK(has(json, R"("maskedPaths":["/proc/acpi","/proc/asound","/proc/kcore","/proc/keys")"));
  CHECK(has(json, R"("readonlyPaths":["/proc/bus","/proc/fs","/proc/irq","/proc/sys","/proc/sysrq-trigger"])"));
  CHECK(has(json, R"({"destination":"/data","type":"bind","source":"/srv/imagenet","options":["rbind","rprivate","nosuid","nodev","ro"]})"));
  CHECK(has(json, R"({"destination":"/out","type":"bind","source":"/srv/out","options":["rbind","rprivate","nosuid","nodev","rw"]})"));
  CHECK(has(json, R"({"destination":"/etc/hosts","type":"bind","source":"/etc/hosts","options":["rbind","rprivate","ro"]})"));
  CHECK(has(json, R"("cgroupsPath":"/yard/node-a/12-0")"));
  CHECK(has(json, R"("seccomp":{"defaultAction":"SCMP_ACT_ALLOW")"));
  for (const char* denied : {"\"unshare\"", "\"mount\"", "\"setns\"", "\"keyctl\"", "\"bpf\"", "\"userfaultfd\""})
    CHECK(has(json, denied));
  CHECK(has(json, R"("names":["clone"],"action":"SCMP_ACT_ERRNO","errnoRet":1,"args":[{"index":0,"value":268435456,"valueTwo":268435456,"op":"SCMP_CMP_MASKED_EQ"}])"));
  CHECK(has(json, R"("size=268435456")"));  // /dev/shm: half the memory limit
  CHECK(has(json, R"("devices":[{"path":"/dev/nvidia0","type":"c","major":195,"minor":0,"fileMode":438,"uid":0,"gid":0}])"));
  CHECK(has(json, R"("resources":{"devices":[{"allow":false,"access":"rwm"},{"allow":true,"type":"c","major":195,"minor":0,"access":"rwm"}]})"));

  std::string exec = ociProcessJson(p.value(), {"cat", "/etc/hostname"});
  CHECK(has(exec, R"("args":["cat","/etc/hostname"])"));
  CHECK(has(exec, R"("env":["RANK=0","PATH=/opt/bin:/bin"])"));
  CHECK(has(exec, R"("noNewPrivileges":true)"));
}

TEST_CASE("oci: GPU device nodes for the assigned GPUs, plus the control nodes present") {
  CHECK(gpuDevices("").value().empty());
  CHECK(gpuDevices("0,x").error() == "gpus: \"0,x\" must be a comma list of GPU indexes");
  if (geteuid() != 0) {
    WARN("skipped: mknod needs root");
    return;
  }
  char tmpl[] = "/tmp/yard-dev-XXXXXX";
  std::string dev = mkdtemp(tmpl);
  REQUIRE(::mknod((dev + "/nvidia0").c_str(), S_IFCHR | 0666, makedev(195, 0)) == 0);
  REQUIRE(::mknod((dev + "/nvidia2").c_str(), S_IFCHR | 0666, makedev(195, 2)) == 0);
  REQUIRE(::mknod((dev + "/nvidiactl").c_str(), S_IFCHR | 0666, makedev(195, 255)) == 0);
  auto d = gpuDevices("0,2", dev);
  REQUIRE(d.isOk());
  REQUIRE(d.value().size() == 3);
  CHECK(d.value()[0].path == "/dev/nvidia0");
  CHECK(d.value()[1].path == "/dev/nvidia2");
  CHECK(d.value()[1].minor == 2);
  CHECK(d.value()[2].path == "/dev/nvidiactl");
  CHECK(d.value()[2].minor == 255);
  CHECK(gpuDevices("1", dev).error() == "GPU device " + dev + "/nvidia1 is missing or not a character device");
  std::filesystem::remove_all(dev);
}

TEST_CASE("oci: GPU device minors come from the driver's list by UUID, not from the index") {
  char tmpl[] = "/tmp/yard-proc-XXXXXX";
  std::string proc = mkdtemp(tmpl);
  auto gpu = [&](const std::string& pci, const std::string& uuid, int minor) {
    std::filesystem::create_directories(proc + "/driver/nvidia/gpus/" + pci);
    std::ofstream(proc + "/driver/nvidia/gpus/" + pci + "/information")
        << "Model: \t\t NVIDIA H200\nIRQ:   \t\t 42\nGPU UUID: \t GPU-" << uuid << "\nVideo BIOS: \t ??\n"
        << "Device Minor: \t " << minor << "\n";
  };
  gpu("0000:18:00.0", "aaaa", 1);  // index 0 is /dev/nvidia1 on this host
  gpu("0000:2a:00.0", "bbbb", 0);
  CHECK(gpuDeviceMinors("0,1", "GPU-aaaa,GPU-bbbb", proc) == "1,0");
  CHECK(gpuDeviceMinors("1", "GPU-bbbb", proc) == "0");
  CHECK(gpuDeviceMinors("3", "GPU-cccc", proc) == "3");   // not listed: the index stands
  CHECK(gpuDeviceMinors("0,1", "", "/nonexistent") == "0,1");
  CHECK(gpuDeviceMinors("", "", proc) == "");
  std::filesystem::remove_all(proc);
}
