// The table of registered device backends (one per Device), guarded by a mutex.
#include "runtime/executor/device_context.h"

#include <map>
#include <mutex>

namespace onnxamp::exec {
namespace {

struct BackendTable {
  std::mutex mutex;
  // Node-based map: a pointer FindDeviceBackend returned stays valid while the entry is replaced in place.
  std::map<Device, DeviceBackend> backends;
};

BackendTable& Table() {
  static BackendTable* table = new BackendTable();
  return *table;
}

}  // namespace

void RegisterDeviceBackend(const DeviceBackend& backend) {
  ONNXAMP_CHECK(backend.kernels != nullptr && backend.create_context != nullptr,
                "a device backend needs kernels and a context factory");
  BackendTable& table = Table();
  std::lock_guard<std::mutex> lock(table.mutex);
  table.backends[backend.device] = backend;
}

void UnregisterDeviceBackend(Device device) {
  BackendTable& table = Table();
  std::lock_guard<std::mutex> lock(table.mutex);
  table.backends.erase(device);
}

const DeviceBackend* FindDeviceBackend(Device device) {
  BackendTable& table = Table();
  std::lock_guard<std::mutex> lock(table.mutex);
  auto it = table.backends.find(device);
  return it == table.backends.end() ? nullptr : &it->second;
}

}  // namespace onnxamp::exec
