// The OpInfos of the text ops: StringNormalizer and TfIdfVectorizer.
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {

void RegisterTextOpInfos(OpInfoRegistry& r) {
  r.Add("StringNormalizer").NotDifferentiable("string in, string out");
  r.Add("TfIdfVectorizer")
      .Keep("n-gram counts and their weights (a text pipeline's features, not activations)")
      .NotDifferentiable("counts of integer or string tokens");
}

}  // namespace onnxamp::ops
