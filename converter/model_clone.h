// CloneModel: a deep copy of a model (graph, functions, metadata), for passes that work on a copy.
#pragma once

#include "runtime/ir/model.h"

namespace onnxamp::converter {

// A deep copy of `m`: graph and function bodies cloned, every other field copied.
ir::Model CloneModel(const ir::Model& m);

}  // namespace onnxamp::converter
