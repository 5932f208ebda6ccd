// A model exported with a fixed batch dimension (dim 0 of its data inputs is a number, as PyTorch exports without
// dynamic axes write it) made to run at any batch size: the batch becomes a symbolic dim wherever it reaches, and
// shape constants that bake the export's batch size in are rewritten where the rewrite is provably right, or the
// node that prevents it is named.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/model.h"

namespace onnxamp::trainer {

struct BatchDimReport {
  int64_t exported = 0;  // the fixed batch size found on the data inputs; 0 when the model was left unchanged
  std::string symbol;    // the symbolic dim that replaced it
  int inputs = 0;        // data inputs whose dim 0 was made symbolic
  int annotations = 0;   // other declared shapes (value_info, outputs) made symbolic or dropped
  int constants = 0;     // shape constants rewritten (a Reshape's leading batch size -> 0 or -1)
};

// Makes dim 0 of `data_inputs` (graph inputs the dataset feeds, batch-major) symbolic, follows the batch through the
// graph (which dim of each value is the batch, or that a value depends on it in a way not followed), and then:
// - every declared shape whose batch dim was the fixed size gets the symbol; a declared shape of a value that depends
//   on the batch otherwise keeps its rank and loses its fixed dims;
// - a Reshape whose constant shape starts with the export's batch size, on an input whose dim 0 is the batch, gets 0
//   there (copy dim 0; -1 under allowzero=1) in a constant of its own.
// Errors (one line, naming the node and its op; the model is then unchanged): a Reshape that splits or merges the
// batch dim, Slice/Tile/Expand/Pad/Squeeze/Resize constants that depend on the batch size, a constant operand (of
// an Add, Concat, Gemm, MatMul, ...; possibly made by ConstantOfShape, Expand, Tile or Range) whose dim meeting the
// batch has the export's size, data inputs with different fixed batch sizes, subgraphs that read batch values.
// Nothing changes when no data input has a fixed dim 0 (already symbolic, or unknown).
Status MakeBatchDimSymbolic(ir::Model& model, const std::vector<std::string>& data_inputs,
                            BatchDimReport* report = nullptr);

// The graph inputs without an initializer: what a dataset feeds (for models used without a training graph).
std::vector<std::string> GraphDataInputs(const ir::Graph& graph);

}  // namespace onnxamp::trainer
