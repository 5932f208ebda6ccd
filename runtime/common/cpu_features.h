// What the x86-64 CPU this process runs on supports, read once: the run-time choice between the AVX-512, AVX2 and
// portable kernels. False everywhere on other architectures and compilers.
#pragma once

namespace onnxamp {

#if defined(__x86_64__) && defined(__GNUC__)
inline bool CpuHasAvx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has;
}
// AVX2 with FMA (every AVX2 kernel here multiplies with FMA).
inline bool CpuHasAvx2Fma() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
}
inline bool CpuHasAvx512F() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return has;
}
#else
inline bool CpuHasAvx2() { return false; }
inline bool CpuHasAvx2Fma() { return false; }
inline bool CpuHasAvx512F() { return false; }
#endif

}  // namespace onnxamp
