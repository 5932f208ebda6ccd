// `onnxamp inspect MODEL [--json]`: prints what a model contains, checking its external data references without
// reading the data.
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "importer/model_io.h"
#include "importer/onnx_proto.h"
#include "runtime/common/file_util.h"
#include "runtime/ir/onnx_schema.h"
#include "runtime/ir/verify.h"
#include "tools/onnxamp/cli_error.h"
#include "tools/onnxamp/commands.h"
#include "tools/onnxamp/inspect.h"

namespace onnxamp::cli {
namespace {

// The model as the importer converts it, before verification: lets inspect list every verifier finding of a
// model that LoadModel refuses at the first one. nullopt when the file does not get that far.
std::optional<ir::Model> LoadUnverified(const std::string& path) {
  StatusOr<std::string> bytes = ReadFile(path, uint64_t{2} << 30);
  if (!bytes.ok()) return std::nullopt;
  onnx::ModelProto proto;
  if (!proto.ParseFromString(*bytes)) return std::nullopt;
  std::string folder = std::filesystem::path(path).parent_path().string();
  importer::ExternalDataContext ext{folder.empty() ? std::string(".") : folder, /*load=*/false};
  StatusOr<ir::Model> model = importer::ModelFromProto(proto, ext);
  if (!model.ok()) return std::nullopt;
  return std::move(model).value();
}

std::string Render(const InspectArgs& args, const ir::Model& model) {
  nlohmann::ordered_json report = tools::InspectModel(model);
  if (!args.json) return tools::RenderInspectText(report, args.model);
  nlohmann::ordered_json doc;
  doc["file"] = args.model;
  doc.update(report);
  // Invalid UTF-8 in names (ONNX strings are bytes) is replaced rather than thrown on.
  return doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

bool WriteStdout(const std::string& text) {
  return std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0;
}

}  // namespace

CLI::App* AddInspectCommand(CLI::App& app, InspectArgs& args) {
  CLI::App* cmd = app.add_subcommand("inspect", "Print a model's opsets, inputs/outputs, ops, parameters and findings");
  cmd->add_option("MODEL", args.model, "ONNX model file")->required();
  cmd->add_flag("--json", args.json, "Write one JSON document to stdout instead of text");
  return cmd;
}

int RunInspect(const InspectArgs& args) {
  importer::LoadOptions options;
  // Sizes come from dims, so inspect stays fast on multi-GB models; the references are still checked (file, folder,
  // byte range), and a model whose data would not load fails here as it would in `convert`.
  options.load_external_data = false;
  StatusOr<ir::Model> model = importer::LoadModel(args.model, options);
  if (!model.ok()) {
    // A model that converts but fails verification still gets its report, listing every finding; the exit
    // status and the error line are those of any other failure.
    std::optional<ir::Model> unverified = LoadUnverified(args.model);
    if (unverified && (!ir::VerifyAll(*unverified).empty() || !ir::CheckOnnxSchemas(*unverified).empty())) {
      WriteStdout(Render(args, *unverified));
    }
    return PrintError(model.status());
  }
  if (!WriteStdout(Render(args, *model))) return PrintError("<stdout>: write failed");
  return kExitOk;
}

}  // namespace onnxamp::cli
