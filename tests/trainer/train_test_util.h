// Shared by the trainer's tests (CPU and CUDA): the reference models and random classification data bound to them.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "importer/model_io.h"
#include "runtime/common/half.h"
#include "trainer/data/dataset.h"
#include "trainer/graph/training_graph.h"

namespace onnxamp::trainer::test_util {

// The folder of the bundled models: $ONNXAMP_MODELS_DIR (a test binary run away from its source tree, as on the GPU
// machine), else <source>/models (ONNXAMP_SOURCE_DIR is set by the test targets).
inline std::string ReferenceModelsDir() {
  const char* env = std::getenv("ONNXAMP_MODELS_DIR");
  return env && *env ? std::string(env) : std::string(ONNXAMP_SOURCE_DIR) + "/models";
}

// A model of models/; a missing one aborts the test with its path (not the whole program).
inline ir::Model LoadReference(const std::string& name) {
  StatusOr<ir::Model> m = importer::LoadModel(ReferenceModelsDir() + "/" + name);
  if (!m.ok()) {
    ADD_FAILURE() << m.status().message() << " (set ONNXAMP_MODELS_DIR)";
    return ir::Model();
  }
  return std::move(m).value();
}

// n samples of normal float features of `sample_dims` and random class labels in [0, classes) (array "labels"),
// bound to the model's first input.
inline Dataset RandomClassData(const ir::Model& model, std::vector<int64_t> sample_dims, int64_t n, int64_t classes,
                               uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  std::vector<int64_t> dims = {n};
  dims.insert(dims.end(), sample_dims.begin(), sample_dims.end());
  ir::Tensor x(DType::kFloat32, dims);
  for (float& v : x.mutable_values<float>()) v = normal(gen);
  x.set_name(model.graph->inputs()[0]->name());
  ir::Tensor y(DType::kInt64, {n});
  for (int64_t i = 0; i < n; ++i) y.mutable_values<int64_t>()[i] = static_cast<int64_t>(gen() % classes);
  y.set_name("labels");
  StatusOr<Dataset> d = Dataset::FromTensors({x, y}, "data");
  EXPECT_TRUE(d.ok()) << d.status().message();
  BindOptions bind;
  bind.labels.array = "labels";
  bind.labels.kind = LabelKind::kClassIndices;
  StatusOr<Dataset> b = d->Bind(DataInputs(*model.graph), bind);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return std::move(b).value();
}

// Appends the train graph's state feeds to `feeds`: the loss scale, and every parameter and buffer at its initial
// value, each named after its graph input.
inline void AddInitialStateFeeds(const TrainingGraphs& g, float loss_scale, std::vector<ir::Tensor>* feeds) {
  ir::Tensor scale(DType::kFloat32, {});
  scale.mutable_values<float>()[0] = loss_scale;
  scale.set_name(g.loss_scale);
  feeds->push_back(scale);
  for (const Parameter& p : g.params) {
    ir::Tensor t = p.initial;
    t.set_name(p.name);
    feeds->push_back(t);
  }
  for (const Buffer& b : g.buffers) {
    ir::Tensor t = b.initial;
    t.set_name(b.name);
    feeds->push_back(t);
  }
}

// `fp32` rounded to `low` (float16 or bfloat16), named `name`: the low-precision weight copy an optimizer writes.
inline ir::Tensor LowCopy(const ir::Tensor& fp32, DType low, const std::string& name) {
  ir::Tensor t(low, fp32.dims());
  const auto src = fp32.values<float>();
  auto dst = t.mutable_values<uint16_t>();
  for (size_t i = 0; i < src.size(); ++i) {
    dst[i] = low == DType::kFloat16 ? FloatToHalfBits(src[i]) : FloatToBFloat16Bits(src[i]);
  }
  t.set_name(name);
  return t;
}

}  // namespace onnxamp::trainer::test_util
