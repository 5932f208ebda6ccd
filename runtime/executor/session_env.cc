// The CLI's environment switches for SessionOptions (see session_env.h).
#include "runtime/executor/session_env.h"

#include <cstdlib>
#include <string_view>

namespace onnxamp::exec {
namespace {

// The variable's value, or null when it is not set.
const char* Env(const char* name) { return std::getenv(name); }

}  // namespace

StatusOr<SessionOptions> CliSessionOptionsFromEnvironment(SessionOptions options) {
  if (const char* v = Env("ONNXAMP_GRAPH_OPT")) {
    const std::string_view s(v);
    if (s == "0" || s == "none") {
      options.graph_optimization = GraphOptimization::kNone;
    } else if (s == "basic") {
      options.graph_optimization = GraphOptimization::kBasic;
    } else if (s == "1" || s == "all") {
      options.graph_optimization = GraphOptimization::kAll;
    } else {
      return InvalidArgument("ONNXAMP_GRAPH_OPT=", s, ": expected 0, none, basic, 1 or all");
    }
  }
  if (const char* v = Env("ONNXAMP_BLOCKED_LAYOUT")) options.blocked_layout = std::string_view(v) != "0";
  if (const char* v = Env("ONNXAMP_CHANNELS_LAST")) options.channels_last = std::string_view(v) != "0";
  if (const char* v = Env("ONNXAMP_LINALG")) {
    const std::string_view s(v);
    if (s == "reference") {
      options.kernels.linalg = LinalgImpl::kReference;
    } else if (s == "portable") {
      options.kernels.linalg = LinalgImpl::kPortable;
    } else if (s == "onednn") {
      options.kernels.linalg = LinalgImpl::kOneDnn;
    } else {
      return InvalidArgument("ONNXAMP_LINALG=", s, ": expected reference, portable or onednn");
    }
  }
  if (const char* v = Env("ONNXAMP_CUDA_TF32")) options.kernels.cuda_tf32 = std::string_view(v) == "1";
  if (const char* v = Env("ONNXAMP_CUDA_CONV_DIRECT")) options.kernels.cuda_conv_direct = std::string_view(v) == "1";
  return options;
}

}  // namespace onnxamp::exec
