#pragma once
// libnvidia-ml.so.1, loaded at run time (the agent has no link-time dependency on the NVIDIA
// driver) and initialised for as long as this lives: capacity discovery and the topology
// queries (nvml_topology.h) share one load and one nvmlInit at start.

#include <dlfcn.h>

#include <memory>

namespace yard::agent {

class NvmlLibrary {
 public:
  // Null when the library is missing or nvmlInit_v2 fails (no driver, no GPU).
  static std::unique_ptr<NvmlLibrary> open() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return nullptr;
    auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    if (!init || init() != 0) {
      dlclose(lib);
      return nullptr;
    }
    return std::unique_ptr<NvmlLibrary>(new NvmlLibrary(lib));
  }
  ~NvmlLibrary() {
    if (auto shutdown = fn<int (*)()>("nvmlShutdown")) shutdown();
    dlclose(lib_);
  }
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  // The entry point `name` with the signature nvml.h gives it (F), or null when this driver
  // lacks it.
  template <typename F>
  F fn(const char* name) const {
    return reinterpret_cast<F>(dlsym(lib_, name));
  }

 private:
  explicit NvmlLibrary(void* lib) : lib_(lib) {}
  void* lib_;
};

}  // namespace yard::agent
