#include "trainer/device_training.h"

#include <mutex>

namespace onnxamp::trainer {
namespace {

std::mutex registry_mutex;
DeviceTrainingFactory cuda_factory = nullptr;

}  // namespace

void RegisterDeviceTraining(exec::Device device, DeviceTrainingFactory factory) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  if (device == exec::Device::kCuda) cuda_factory = factory;
}

DeviceTrainingFactory FindDeviceTraining(exec::Device device) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  return device == exec::Device::kCuda ? cuda_factory : nullptr;
}

}  // namespace onnxamp::trainer
