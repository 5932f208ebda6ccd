// onnxamp_gen_models: writes the reference models (models/*.onnx) with deterministic weights.
//
// Usage: onnxamp_gen_models OUT_DIR [--only NAME]... [--all] [--list] [--samples BATCH]
// Without --only, writes every small model (the ones checked in under models/); --all adds the large ones
// (mlp4096, resnet50, mlp100m), which are never checked in. --samples BATCH also writes NAME.sample.npz beside
// each model: one deterministic input set of batch BATCH (float inputs uniform in [-1, 1), integer inputs, the
// transformer's token ids, uniform in [0, 128), its vocabulary), for `onnxamp run` and `onnxamp convert --auto`.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "importer/model_io.h"
#include "importer/tensor_file.h"
#include "runtime/ir/verify.h"
#include "tools/gen_models/builder.h"
#include "tools/gen_models/models.h"

namespace onnxamp::gen {
namespace {

int Usage(const std::string& message) {
  std::fprintf(stderr,
               "error: %s (usage: onnxamp_gen_models OUT_DIR [--only NAME]... [--all] [--list] [--samples BATCH])\n",
               message.c_str());
  return 2;
}

// One input set for `model`: every symbolic dim is `batch`; float inputs uniform in [-1, 1), integer inputs
// uniform in [0, 128). Values are seeded by the model and input names, so the files are the same on every run.
StatusOr<std::vector<ir::Tensor>> SampleInputs(const ir::Model& model, const std::string& model_name, int64_t batch) {
  std::vector<ir::Tensor> tensors;
  for (const ir::Value* v : model.graph->inputs()) {
    if (v->initializer()) continue;
    const ir::ValueType& type = v->type();
    if (!type.is_tensor() || !type.shape()) return InvalidArgument("input '", v->name(), "' has no tensor shape");
    std::vector<int64_t> dims;
    for (const ir::Dim& d : *type.shape()) dims.push_back(d.is_value() ? d.value : batch);
    const std::string seed_name = model_name + ".sample." + v->name();
    if (type.elem_type() == DType::kFloat32) {
      ir::Tensor t = UniformTensor(seed_name, dims, -1.0, 1.0);
      t.set_name(v->name());
      tensors.push_back(std::move(t));
    } else if (type.elem_type() == DType::kInt64) {
      const ir::Tensor u = UniformTensor(seed_name, dims, 0.0, 128.0);
      ir::Tensor t(DType::kInt64, dims);
      auto out = t.mutable_values<int64_t>();
      const auto in = u.values<float>();
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int64_t>(std::floor(in[i]));
      t.set_name(v->name());
      tensors.push_back(std::move(t));
    } else {
      return InvalidArgument("input '", v->name(), "' has type ", DTypeName(type.elem_type()),
                             ": samples are written for float and int64 inputs only");
    }
  }
  return tensors;
}

int Main(int argc, char** argv) {
  std::string out_dir;
  int64_t samples_batch = 0;
  std::vector<std::string> only;
  bool all = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--only") {
      if (i + 1 >= argc) return Usage("--only needs a model name");
      only.push_back(argv[++i]);
    } else if (arg == "--samples") {
      if (i + 1 >= argc) return Usage("--samples needs a batch size");
      char* end = nullptr;
      samples_batch = std::strtoll(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || samples_batch < 1 || samples_batch > 4096) {
        return Usage(std::string("--samples needs a batch size from 1 to 4096, got '") + argv[i] + "'");
      }
    } else if (arg == "--all") {
      all = true;
    } else if (arg == "--list") {
      for (const ModelSpec& s : Specs()) std::printf("%s%s\n", s.name, s.large ? " (large)" : "");
      return 0;
    } else if (arg == "-h" || arg == "--help") {
      std::printf("usage: onnxamp_gen_models OUT_DIR [--only NAME]... [--all] [--list] [--samples BATCH]\n");
      return 0;
    } else if (!arg.empty() && arg[0] == '-') {
      return Usage("unknown option " + arg);
    } else if (out_dir.empty()) {
      out_dir = arg;
    } else {
      return Usage("more than one output folder given");
    }
  }
  if (out_dir.empty()) return Usage("no output folder given");
  for (const std::string& name : only) {
    bool known = false;
    for (const ModelSpec& s : Specs()) known = known || name == s.name;
    if (!known) return Usage("unknown model '" + name + "'");
  }

  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) {
    std::fprintf(stderr, "error: %s: cannot create folder: %s\n", out_dir.c_str(), ec.message().c_str());
    return 1;
  }
  for (const ModelSpec& spec : Specs()) {
    bool wanted = only.empty() ? (all || !spec.large) : false;
    for (const std::string& name : only) wanted = wanted || name == spec.name;
    if (!wanted) continue;
    const ir::Model model = spec.build();
    if (Status s = ir::Verify(model); !s.ok()) {
      std::fprintf(stderr, "error: %s: generated model fails verification: %s\n", spec.name, s.message().c_str());
      return 1;
    }
    const std::string path = (std::filesystem::path(out_dir) / (std::string(spec.name) + ".onnx")).string();
    if (Status s = importer::SaveModel(model, path); !s.ok()) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      return 1;
    }
    std::printf("wrote %s\n", path.c_str());
    if (samples_batch > 0) {
      StatusOr<std::vector<ir::Tensor>> samples = SampleInputs(model, spec.name, samples_batch);
      if (!samples.ok()) {
        std::fprintf(stderr, "error: %s: %s\n", spec.name, samples.status().message().c_str());
        return 1;
      }
      const std::string sample_path =
          (std::filesystem::path(out_dir) / (std::string(spec.name) + ".sample.npz")).string();
      if (Status s = importer::WriteNpz(*samples, sample_path); !s.ok()) {
        std::fprintf(stderr, "error: %s\n", s.message().c_str());
        return 1;
      }
      std::printf("wrote %s\n", sample_path.c_str());
    }
  }
  return 0;
}

}  // namespace
}  // namespace onnxamp::gen

int main(int argc, char** argv) { return onnxamp::gen::Main(argc, argv); }
