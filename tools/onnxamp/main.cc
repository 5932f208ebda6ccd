// onnxamp: the command-line tool. Parses the command line and dispatches to one subcommand.
//
// Exit status: 0 success, 1 failure, 2 usage error. Errors are one line on stderr, "error: ...".
#include <CLI/CLI.hpp>
#include <exception>
#include <new>

#include "tools/onnxamp/cli_error.h"
#include "tools/onnxamp/commands.h"
#ifdef ONNXAMP_WITH_CUDA
#include "runtime/cuda/cuda_context.h"
#endif
#ifdef ONNXAMP_TRAINER_CUDA
#include "trainer/cuda/cuda_training.h"
#endif

namespace onnxamp::cli {
namespace {

// The subcommand the user named, for usage hints: the deepest parsed one, or "" for the top level.
std::string ParsedCommand(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) return sub->get_name();
  return "";
}

int Main(int argc, char** argv) {
  CLI::App app{"onnxamp: ONNX mixed-precision conversion, training and export", "onnxamp"};
  app.require_subcommand(1, 1);
  app.set_help_all_flag("--help-all", "Print help for every subcommand");

  InspectArgs inspect_args;
  CLI::App* inspect = AddInspectCommand(app, inspect_args);
  RepackArgs repack_args;
  CLI::App* repack = AddRepackCommand(app, repack_args);
  RunArgs run_args;
  CLI::App* run = AddRunCommand(app, run_args);
  ConvertArgs convert_args;
  CLI::App* convert = AddConvertCommand(app, convert_args);
  TrainArgs train_args;
  CLI::App* train = AddTrainCommand(app, train_args);
  ExportArgs export_args;
  CLI::App* export_cmd = AddExportCommand(app, export_args);
  CLI::App* version = AddVersionCommand(app);

  // CLI11 would report an unknown command as a missing one; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    const std::string name = argv[1];
    bool known = false;
    for (const CLI::App* sub : {inspect, repack, run, convert, train, export_cmd, version})
      known = known || sub->check_name(name);
    if (!known) return PrintUsageError("unknown command '" + name + "'", "");
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    return PrintUsageError(e.what(), ParsedCommand(app));
  }

#ifdef ONNXAMP_WITH_CUDA
  // Makes `--device cuda` available to the commands when a usable device is present (registers nothing
  // otherwise; `run` then says why). After parsing, so that --help and usage errors never touch the driver.
  cuda::RegisterCudaBackend();
#endif
#ifdef ONNXAMP_TRAINER_CUDA
  trainer::cuda::RegisterCudaTraining();  // `train --device cuda`
#endif
  if (inspect->parsed()) return RunInspect(inspect_args);
  if (repack->parsed()) return RunRepack(repack_args);
  if (run->parsed()) return RunRun(run_args);
  if (convert->parsed()) return RunConvert(convert_args);
  if (train->parsed()) return RunTrain(train_args);
  if (export_cmd->parsed()) return RunExport(export_args);
  if (version->parsed()) return RunVersion();
  return PrintUsageError("no subcommand given", "");
}

}  // namespace
}  // namespace onnxamp::cli

int main(int argc, char** argv) {
  try {
    return onnxamp::cli::Main(argc, argv);
  } catch (const std::bad_alloc&) {
    return onnxamp::cli::PrintError("out of memory");
  } catch (const std::exception& e) {
    return onnxamp::cli::PrintError(std::string("internal error: ") + e.what());
  }
}
