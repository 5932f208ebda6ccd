// The command-line tools' environment switches for sessions. Only the CLI programs (onnxamp, onnxamp_bench and the
// conformance runner) call this: the library itself never reads the environment, so sessions in one process can be
// configured differently (an evaluation session and a training session, or tests comparing two settings).
#pragma once

#include "runtime/executor/session.h"

namespace onnxamp::exec {

// `options` with the settings the environment asks for; variables that are not set leave the field as it is:
//   ONNXAMP_GRAPH_OPT         0 or none: GraphOptimization::kNone; basic: kBasic; 1 or all: kAll
//   ONNXAMP_BLOCKED_LAYOUT    0: blocked_layout = false (any other value: true)
//   ONNXAMP_CHANNELS_LAST     0: channels_last = false (any other value: true)
//   ONNXAMP_LINALG            reference | portable | onednn: kernels.linalg
//   ONNXAMP_CUDA_TF32         1: kernels.cuda_tf32 = true (any other value: false)
//   ONNXAMP_CUDA_CONV_DIRECT  1: kernels.cuda_conv_direct = true (any other value: false)
// An unknown ONNXAMP_GRAPH_OPT or ONNXAMP_LINALG value is InvalidArgument naming the variable and its values.
StatusOr<SessionOptions> CliSessionOptionsFromEnvironment(SessionOptions options = {});

}  // namespace onnxamp::exec
