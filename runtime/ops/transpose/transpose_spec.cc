// Transpose: the `perm` attribute and its check against an input (see transpose.h).
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/transpose/transpose.h"

namespace onnxamp::ops {

Status TransposeSpec::Parse(const ir::Node& node) {
  const ir::Attribute* a = node.FindAttribute("perm");
  if (!a) return Status::Ok();
  has_perm_ = true;
  perm_ = a->ints;
  std::vector<bool> seen(perm_.size(), false);
  for (int64_t p : perm_) {
    if (p < 0 || p >= static_cast<int64_t>(perm_.size()) || seen[p]) {
      return InvalidArgument("attribute 'perm' ", ShapeToString(perm_), " is not a permutation of 0..",
                             static_cast<int64_t>(perm_.size()) - 1);
    }
    seen[p] = true;
  }
  return Status::Ok();
}

StatusOr<std::vector<int64_t>> TransposeSpec::Perm(const ir::Tensor& x) const {
  const size_t rank = x.dims().size();
  std::vector<int64_t> perm = perm_;
  if (!has_perm_) {
    for (size_t k = rank; k-- > 0;) perm.push_back(static_cast<int64_t>(k));
  } else if (perm.size() != rank) {
    return InvalidArgument("attribute 'perm' ", ShapeToString(perm), " has ", perm.size(),
                           " entries but the input has rank ", rank, " (shape ", ShapeToString(x.dims()), ")");
  }
  return perm;
}

}  // namespace onnxamp::ops
