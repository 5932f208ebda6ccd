// `onnxamp version`: the version, build type, whether the CUDA backend is compiled in, and the devices it sees.
#include <cstdio>
#include <string>

#include "tools/onnxamp/cli_error.h"
#include "tools/onnxamp/commands.h"
#ifdef ONNXAMP_WITH_CUDA
#include "runtime/cuda/device.h"
#endif

namespace onnxamp::cli {

CLI::App* AddVersionCommand(CLI::App& app) {
  return app.add_subcommand("version", "Print the version, build type and CUDA backend status");
}

int RunVersion() {
  const std::string build_type = ONNXAMP_BUILD_TYPE;
  std::printf("onnxamp %s (%s build)\n", ONNXAMP_VERSION, build_type.empty() ? "unspecified" : build_type.c_str());
#ifdef ONNXAMP_WITH_CUDA
  std::printf("CUDA backend: compiled in\n");
  const int count = cuda::CudaDeviceCount();
  if (count == 0) std::printf("%s\n", cuda::DescribeCudaDevices().c_str());  // says why: no driver, no device
  if (count > 0) std::printf("%d CUDA device%s:\n", count, count == 1 ? "" : "s");
  for (int i = 0; i < count; ++i) {
    StatusOr<cuda::CudaDeviceInfo> info = cuda::GetCudaDeviceInfo(i);
    const std::string line =
        info.ok() ? cuda::DescribeCudaDevice(*info) : StrCat("cuda:", i, " unavailable: ", info.status().message());
    std::printf("  %s\n", line.c_str());
  }
#else
  std::printf("CUDA backend: not compiled in\n");
#endif
  return kExitOk;
}

}  // namespace onnxamp::cli
