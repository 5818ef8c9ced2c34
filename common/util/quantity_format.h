#pragma once
// The human forms of quantities, one definition for the spec layer, the scheduler's reasons
// and the CLI: cpu 4000 -> "4", 500 -> "500m"; memory 17179869184 -> "16Gi" (the largest
// binary unit that divides it exactly). Header-only so the pure scheduler links nothing.

#include <cstdint>
#include <string>

namespace yard {

inline std::string formatCpuMillis(int64_t millis) {
  if (millis % 1000 == 0) return std::to_string(millis / 1000);
  return std::to_string(millis) + "m";
}

inline std::string formatMemoryBytes(int64_t bytes) {
  static constexpr const char* kSuffix[] = {"Ei", "Pi", "Ti", "Gi", "Mi", "Ki"};
  for (int i = 0; i < 6; ++i) {
    int64_t unit = int64_t(1) << (10 * (6 - i));
    if (bytes != 0 && bytes % unit == 0) return std::to_string(bytes / unit) + kSuffix[i];
  }
  return std::to_string(bytes);
}

// For reading at a glance (node capacity, OOM reasons): the exact form when it is a whole
// number of some unit from Mi up, else Gi with one decimal from 1Gi ("23.5Gi" for a host's
// 24683620Ki), else Mi with one decimal.
inline std::string formatMemoryShort(int64_t bytes) {
  constexpr int64_t kMi = int64_t(1) << 20, kGi = int64_t(1) << 30;
  std::string exact = formatMemoryBytes(bytes);
  if (bytes % kMi == 0 || bytes <= 0) return exact;
  auto oneDecimal = [](int64_t v, int64_t unit, const char* suffix) {
    int64_t tenths = (v * 10 + unit / 2) / unit;
    return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + suffix;
  };
  return bytes >= kGi ? oneDecimal(bytes, kGi, "Gi") : oneDecimal(bytes, kMi, "Mi");
}

}  // namespace yard
