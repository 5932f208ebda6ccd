// libFuzzer entry point: arbitrary bytes through LoadModelFromBytes, and every model that loads back out again.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "importer/model_io.h"
#include "importer/onnx_proto.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  onnxamp::StatusOr<onnxamp::ir::Model> model = onnxamp::importer::LoadModelFromBytes(bytes, "", "fuzz");
  if (model.ok()) {
    onnx::ModelProto proto;
    onnxamp::importer::ModelToProto(*model, &proto);
    std::string out;
    proto.SerializeToString(&out);
  }
  return 0;
}
