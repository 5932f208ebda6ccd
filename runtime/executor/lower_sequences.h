// Sequences the graph's structure fixes, rewritten as tensors. ONNX sequence values (SequenceConstruct,
// SequenceInsert, SplitToSequence, ...) are how exporters write Python lists: torch.jit.script turns
// `outs.append(h)` in a loop into a Loop carrying a sequence that SequenceInsert extends, and `torch.stack(outs)`,
// `torch.cat(outs)`, `outs[i]`, `len(outs)`, `x.unbind(1)` and `torch.split(x, k)` into ConcatFromSequence,
// SequenceAt, SequenceLength and SplitToSequence. The runtime's values are tensors, so these graphs would be refused.
// Where the elements and their order are known when the graph is built, this pass replaces the sequence ops by
// tensor ops that compute the same tensors, so that the graph runs, on the CPU and on CUDA, and trains (the autodiff
// then differentiates ordinary ops, the Loop included).
//
// What a sequence can be (its abstract value while the pass walks the graph in topological order):
//  - a list of known tensor values: SequenceEmpty, SequenceConstruct, and SequenceInsert / SequenceErase without a
//    position or with a constant one;
//  - a stacked tensor S [n, element dims...] whose element i is S[i]: the sequence a Loop builds by appending one
//    tensor per iteration (a loop-carried sequence that starts empty and that the body only extends with
//    SequenceInsert at the back) becomes a scan output of the Loop. The Loop then needs the appended tensors to have
//    one shape in every iteration (its scan output stacks them); a run where they do not fails naming the Loop;
//  - a split of a tensor X along an axis into chunks of a constant length (SplitToSequence without `split`, or with a
//    constant scalar one). keepdims = 0 removes the axis when `split` is absent or the scalar 1, as ONNX Runtime does
//    (the ONNX spec says keepdims is ignored whenever `split` is given; torch.onnx's export of unbind relies on ONNX
//    Runtime's reading). A 1-D `split` of a known length gives a list (the outputs of one Split).
// Uses, of any of these (also from inside a subgraph, such as a Loop body reading the enclosing graph's sequence):
// SequenceAt (any position; a run-time one on a list stacks it, which needs its elements to have one static shape; a
// chunk length other than 1 reads with Slice, so an out-of-range position gives an empty tensor there instead of an
// error), SequenceLength, ConcatFromSequence (with or without new_axis), Identity; SequenceInsert and SequenceErase
// at run-time positions on a stacked tensor (out of range: at the end, or nothing erased). A Loop's list is lowered
// only when its readers after the Loop are SequenceAt, SequenceLength and ConcatFromSequence. A stacked tensor's
// ConcatFromSequence on an axis other than 0 needs the elements' rank (from the rules of ElementRank in the .cc, else
// declared).
//
// Everything else is left as it was, and the session refuses it as before: sequences that are graph inputs or
// outputs, run-time positions on a list of differently shaped elements, a Loop whose list is read otherwise than
// above, sequences in If branches' outputs, SequenceMap, optionals. A sequence op is removed only once nothing reads
// its output.
#pragma once

#include "runtime/common/status.h"
#include "runtime/ir/model.h"

namespace onnxamp::exec {

// Rewrites the sequences of `model` (its graph and every subgraph) as described above; sets *changed when a sequence
// op was replaced. The graph stays valid; its inputs and outputs are unchanged.
Status LowerSequences(ir::Model& model, bool* changed);

// Whether `graph` or a subgraph of it holds an op of the default domain that makes or reads a sequence.
bool HasSequenceOps(const ir::Graph& graph);

}  // namespace onnxamp::exec
