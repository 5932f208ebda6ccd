// The onnxamp subcommands: each adds itself to the CLI11 app and runs once the command line is parsed.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace onnxamp::cli {

// `onnxamp inspect MODEL [--json]`.
struct InspectArgs {
  std::string model;
  bool json = false;
};
CLI::App* AddInspectCommand(CLI::App& app, InspectArgs& args);
int RunInspect(const InspectArgs& args);

// `onnxamp repack MODEL -o OUT [--external-data auto|always|never] [--external-data-file NAME] [--sort]`.
struct RepackArgs {
  std::string model;
  std::string output;
  std::string external_data = "auto";
  std::string external_data_file;
  bool sort = false;
};
CLI::App* AddRepackCommand(CLI::App& app, RepackArgs& args);
int RunRepack(const RepackArgs& args);

// `onnxamp run MODEL --input NAME=FILE ... [--output-dir DIR] [--device cpu|cuda] [--device-index N] [--threads N]`.
struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::string output_dir = ".";
  std::string device = "cpu";
  int device_index = 0;
  int threads = 0;
};
CLI::App* AddRunCommand(CLI::App& app, RunArgs& args);
int RunRun(const RunArgs& args);

// `onnxamp convert MODEL -o OUT [--target fp16|bf16] [--keep-op OP]... [--force-low-op OP]... [--keep-node REGEX]...
// [--force-low-node REGEX]... [--policy FILE.json] [--keep-io-types] [--auto --data FILE... --rtol R --atol A]
// [--report FILE.json] [--external-data auto|always|never] [--print-policy]`.
struct ConvertArgs {
  std::string model;
  std::string output;
  std::string target = "fp16";
  std::vector<std::string> keep_ops;
  std::vector<std::string> low_ops;
  std::vector<std::string> keep_nodes;
  std::vector<std::string> low_nodes;
  std::string policy;
  bool keep_io_types = false;
  bool auto_mode = false;
  std::vector<std::string> data;
  double rtol = 1e-2;
  double atol = 1e-3;
  int threads = 0;
  std::string report;
  std::string external_data = "auto";
  bool print_policy = false;
};
CLI::App* AddConvertCommand(CLI::App& app, ConvertArgs& args);
int RunConvert(const ConvertArgs& args);

// `onnxamp version`.
CLI::App* AddVersionCommand(CLI::App& app);
int RunVersion();

}  // namespace onnxamp::cli
