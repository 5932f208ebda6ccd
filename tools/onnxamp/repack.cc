// `onnxamp repack MODEL -o OUT`: import, verify, optionally sort, and export a model, moving weights into or
// out of external data.
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <system_error>

#include "importer/model_io.h"
#include "runtime/ir/verify.h"
#include "tools/onnxamp/cli_error.h"
#include "tools/onnxamp/commands.h"
#include "tools/onnxamp/inspect.h"

namespace onnxamp::cli {
namespace {

// Sorts `graph` and every subgraph under it topologically (a node's subgraphs are sorted on their own).
Status SortAll(ir::Graph& graph) {
  ONNXAMP_RETURN_IF_ERROR(graph.SortTopologically());
  for (ir::Node* node : graph.nodes()) {
    for (ir::Graph* sub : node->subgraphs()) ONNXAMP_RETURN_IF_ERROR(SortAll(*sub));
  }
  return Status::Ok();
}

struct Counts {
  uint64_t nodes = 0;
  uint64_t initializers = 0;
  std::map<std::string, uint64_t> external_tensors;  // by location
};

void CountAll(const ir::Graph& graph, Counts& counts) {
  for (const ir::Value* v : graph.initializers()) {
    counts.initializers += 1;
    if (v->initializer()->external()) counts.external_tensors[v->initializer()->external()->location] += 1;
  }
  for (const ir::Node* node : graph.nodes()) {
    counts.nodes += 1;
    for (const ir::Graph* sub : node->subgraphs()) CountAll(*sub, counts);
  }
}

std::string SizeOf(const std::filesystem::path& path) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  return ec ? std::string("size unknown") : tools::FormatBytes(size);
}

}  // namespace

CLI::App* AddRepackCommand(CLI::App& app, RepackArgs& args) {
  CLI::App* cmd = app.add_subcommand("repack",
                                     "Import, verify and export a model (moves weights in or out of "
                                     "external data)");
  cmd->add_option("MODEL", args.model, "ONNX model file")->required();
  cmd->add_option("-o,--output", args.output, "Output model file")->required();
  cmd->add_option("--external-data", args.external_data,
                  "auto: keep external tensors external (all external over 2 GB); always: every tensor of 1 KiB "
                  "or more external; never: everything inline")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  cmd->add_option("--external-data-file", args.external_data_file,
                  "External data file name, relative to the output's folder (default: OUT's file name + .data)");
  cmd->add_flag("--sort", args.sort, "Sort the nodes topologically before export");
  return cmd;
}

int RunRepack(const RepackArgs& args) {
  importer::SaveOptions save;
  if (args.external_data == "always") {
    save.external_data = importer::ExternalDataMode::kAlways;
  } else if (args.external_data == "never") {
    save.external_data = importer::ExternalDataMode::kNever;
  } else {
    save.external_data = importer::ExternalDataMode::kAuto;
  }
  if (!args.external_data_file.empty() && save.external_data == importer::ExternalDataMode::kNever) {
    return PrintUsageError("--external-data-file does not go with --external-data never", "repack");
  }
  save.external_data_file = args.external_data_file;

  StatusOr<ir::Model> model = importer::LoadModel(args.model);
  if (!model.ok()) return PrintError(model.status());
  if (Status s = ir::Verify(*model); !s.ok()) return PrintError(s.WithContext(args.model));
  if (args.sort) {
    if (Status s = SortAll(*model->graph); !s.ok()) return PrintError(s.WithContext(args.model));
  }
  if (Status s = importer::SaveModel(*model, args.output, save); !s.ok()) return PrintError(s);
  // The weights are written: free them before the reload, so that peak memory stays that of one model.
  model = StatusOr<ir::Model>(ir::Model());

  // Read the result back (without its external data) both to check it and to describe it.
  importer::LoadOptions reload;
  reload.load_external_data = false;
  StatusOr<ir::Model> written = importer::LoadModel(args.output, reload);
  if (!written.ok()) return PrintError(written.status().WithContext("the exported model does not load back"));
  Counts counts;
  CountAll(*written->graph, counts);

  const std::filesystem::path out(args.output);
  std::string summary = StrCat("repack: ", args.model, " -> ", args.output, " (", SizeOf(out), "): ", counts.nodes,
                               " nodes, ", counts.initializers, " initializers");
  if (counts.external_tensors.empty()) {
    summary += ", no external data";
  } else {
    for (const auto& [location, tensors] : counts.external_tensors) {
      summary +=
          StrCat(", external data ", location, " (", tensors, " tensors, ", SizeOf(out.parent_path() / location), ")");
    }
  }
  std::fprintf(stderr, "%s\n", TerminalSafe(summary).c_str());
  return kExitOk;
}

}  // namespace onnxamp::cli
