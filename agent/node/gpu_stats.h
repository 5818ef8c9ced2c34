#pragma once
// GPU utilisation and memory per device from NVML, read when /metrics is scraped. NVML is
// loaded at run time (libnvidia-ml.so.1, as capacity.cpp's discovery does), so the agent has
// no link-time dependency on the NVIDIA driver and builds and runs on hosts without one. The
// calls go through NvmlCalls so tests can stand in for the driver.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace yard::agent {

struct GpuSample {
  uint32_t index = 0;
  std::string uuid;
  std::optional<double> utilisation;  // busy fraction of the last sample period, 0..1
  std::optional<uint64_t> memoryUsedBytes, memoryTotalBytes;
};

// The NVML entry points used, with nvml.h's signatures (stable ABI); 0 = NVML_SUCCESS.
struct NvmlCalls {
  struct Utilization {
    unsigned gpu, memory;  // percent
  };
  struct Memory {
    unsigned long long total, free, used;
  };
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*count)(unsigned*) = nullptr;
  int (*handle)(unsigned, void**) = nullptr;
  int (*uuid)(void*, char*, unsigned) = nullptr;
  int (*utilization)(void*, Utilization*) = nullptr;
  int (*memory)(void*, Memory*) = nullptr;
};

class GpuStats {
 public:
  // NVML loaded and initialised; nullptr when the library or an entry point is missing or
  // init fails, with why in `why`.
  static std::unique_ptr<GpuStats> openNvml(std::string* why = nullptr);
  // Initialises NVML through `calls`; nullptr when init fails or a call is missing. `library`
  // is dlclose()d by the destructor (null for tests).
  static std::unique_ptr<GpuStats> open(NvmlCalls calls, void* library, std::string* why = nullptr);
  ~GpuStats();
  GpuStats(const GpuStats&) = delete;
  GpuStats& operator=(const GpuStats&) = delete;

  // One sample per device NVML lists now; a value NVML cannot give is left empty.
  std::vector<GpuSample> sample() const;

 private:
  GpuStats(NvmlCalls calls, void* library) : calls_(calls), library_(library) {}
  NvmlCalls calls_;
  void* library_;
};

}  // namespace yard::agent
