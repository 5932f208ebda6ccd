// Numpy-style broadcasting: shape rules and the merged-stride plan behind ForEachBroadcastSpan.
#include "runtime/ops/common/broadcast.h"

#include <algorithm>

namespace onnxamp::ops {

std::string ShapeToString(std::span<const int64_t> dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

namespace {

// Broadcasts `b` into `acc` (both right-aligned). On a clash returns the axis (negative, from the end) and the
// two dims through the out-parameters and false.
bool BroadcastInto(std::vector<int64_t>& acc, std::span<const int64_t> b, int64_t* axis, int64_t* da, int64_t* db) {
  if (b.size() > acc.size()) acc.insert(acc.begin(), b.size() - acc.size(), 1);
  const size_t off = acc.size() - b.size();
  for (size_t k = 0; k < b.size(); ++k) {
    int64_t& a = acc[off + k];
    const int64_t d = b[k];
    if (a == d || d == 1) continue;
    if (a == 1) {
      a = d;
      continue;
    }
    *axis = static_cast<int64_t>(k) - static_cast<int64_t>(b.size());
    *da = a;
    *db = d;
    return false;
  }
  return true;
}

}  // namespace

StatusOr<std::vector<int64_t>> BroadcastShapes(std::span<const int64_t> a, std::span<const int64_t> b) {
  std::vector<int64_t> out(a.begin(), a.end());
  int64_t axis = 0, da = 0, db = 0;
  if (!BroadcastInto(out, b, &axis, &da, &db)) {
    return InvalidArgument("shapes ", ShapeToString(a), " and ", ShapeToString(b), " cannot be broadcast: dim ", da,
                           " vs ", db, " (axis ", axis, ")");
  }
  return out;
}

StatusOr<std::vector<int64_t>> BroadcastShapes(const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < shapes.size(); ++i) {
    int64_t axis = 0, da = 0, db = 0;
    if (BroadcastInto(out, shapes[i], &axis, &da, &db)) continue;
    // Find the earlier input whose dim clashes, to name both shapes.
    size_t j = 0;
    for (; j < i; ++j) {
      const auto& s = shapes[j];
      const int64_t k = static_cast<int64_t>(s.size()) + axis;
      if (k >= 0 && s[k] == da) break;
    }
    if (j == i) j = 0;
    return InvalidArgument("input ", j, " shape ", ShapeToString(shapes[j]), " and input ", i, " shape ",
                           ShapeToString(shapes[i]), " cannot be broadcast: dim ", da, " vs ", db, " (axis ", axis,
                           ")");
  }
  return out;
}

Status CheckUnidirectionalBroadcast(std::span<const int64_t> from, std::span<const int64_t> to, std::string_view what) {
  if (from.size() > to.size()) {
    return InvalidArgument(what, " shape ", ShapeToString(from), " cannot be broadcast to ", ShapeToString(to),
                           ": rank ", from.size(), " is larger than ", to.size());
  }
  const size_t off = to.size() - from.size();
  for (size_t k = 0; k < from.size(); ++k) {
    if (from[k] != 1 && from[k] != to[off + k]) {
      return InvalidArgument(what, " shape ", ShapeToString(from), " cannot be broadcast to ", ShapeToString(to),
                             ": dim ", from[k], " vs ", to[off + k], " (axis ",
                             static_cast<int64_t>(k) - static_cast<int64_t>(from.size()), ")");
    }
  }
  return Status::Ok();
}

std::vector<int64_t> BroadcastStrides(std::span<const int64_t> in, std::span<const int64_t> out) {
  ONNXAMP_CHECK(in.size() <= out.size(), "rank ", in.size(), " > ", out.size());
  std::vector<int64_t> strides(out.size(), 0);
  const size_t off = out.size() - in.size();
  int64_t s = 1;
  for (size_t k = in.size(); k-- > 0;) {
    ONNXAMP_CHECK(in[k] == 1 || in[k] == out[off + k], "dim ", in[k], " vs ", out[off + k]);
    strides[off + k] = in[k] == 1 ? 0 : s;
    s *= in[k];
  }
  return strides;
}

StatusOr<BroadcastPlan> BroadcastPlan::Make(const std::vector<std::vector<int64_t>>& input_shapes) {
  BroadcastPlan plan;
  ONNXAMP_ASSIGN_OR_RETURN(plan.output_dims_, BroadcastShapes(input_shapes));
  plan.Finish(input_shapes);
  return plan;
}

StatusOr<BroadcastPlan> BroadcastPlan::MakeTo(const std::vector<int64_t>& output_shape,
                                              const std::vector<std::vector<int64_t>>& input_shapes) {
  for (size_t i = 0; i < input_shapes.size(); ++i) {
    ONNXAMP_RETURN_IF_ERROR(CheckUnidirectionalBroadcast(input_shapes[i], output_shape, StrCat("input ", i)));
  }
  BroadcastPlan plan;
  plan.output_dims_ = output_shape;
  plan.Finish(input_shapes);
  return plan;
}

void BroadcastPlan::Finish(const std::vector<std::vector<int64_t>>& input_shapes) {
  num_inputs_ = input_shapes.size();
  num_elements_ = 1;
  for (int64_t d : output_dims_) num_elements_ *= d;

  // Full strides per input, then drop size-1 output dims (every input has stride 0 there).
  std::vector<std::vector<int64_t>> full(num_inputs_);
  for (size_t i = 0; i < num_inputs_; ++i) full[i] = BroadcastStrides(input_shapes[i], output_dims_);
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides(num_inputs_);
  for (size_t k = 0; k < output_dims_.size(); ++k) {
    if (output_dims_[k] == 1) continue;
    dims.push_back(output_dims_[k]);
    for (size_t i = 0; i < num_inputs_; ++i) strides[i].push_back(full[i][k]);
  }
  if (dims.empty()) {  // a scalar output (or all dims 1)
    dims.push_back(1);
    for (auto& s : strides) s.push_back(0);
  }

  // Merge dim k into dim k+1 when, for every input, stride[k] == stride[k+1] * dims[k+1]: that covers "both
  // broadcast" (0 == 0) and "both contiguous". Walk from the innermost dim outwards.
  std::vector<int64_t> mdims = {dims.back()};
  std::vector<std::vector<int64_t>> mstrides(num_inputs_);
  for (size_t i = 0; i < num_inputs_; ++i) mstrides[i] = {strides[i].back()};
  for (size_t k = dims.size() - 1; k-- > 0;) {
    bool mergeable = true;
    for (size_t i = 0; i < num_inputs_ && mergeable; ++i) {
      mergeable = strides[i][k] == mstrides[i].front() * mdims.front();
    }
    if (mergeable) {
      mdims.front() *= dims[k];
    } else {
      mdims.insert(mdims.begin(), dims[k]);
      for (size_t i = 0; i < num_inputs_; ++i) mstrides[i].insert(mstrides[i].begin(), strides[i][k]);
    }
  }
  dims_ = std::move(mdims);
  strides_.clear();
  for (size_t i = 0; i < num_inputs_; ++i) strides_.insert(strides_.end(), mstrides[i].begin(), mstrides[i].end());
}

bool BroadcastPlan::IsFull(size_t input) const {
  if (num_elements_ <= 1) return true;
  int64_t expect = 1;
  for (int k = rank() - 1; k >= 0; --k) {
    if (stride(input, k) != expect) return false;
    expect *= dims_[k];
  }
  return true;
}

bool BroadcastPlan::IsScalar(size_t input) const {
  for (int k = 0; k < rank(); ++k) {
    if (stride(input, k) != 0) return false;
  }
  return true;
}

int64_t BroadcastInputOffset(std::span<const int64_t> in, std::span<const int64_t> out, int64_t out_index) {
  int64_t offset = 0;
  int64_t in_stride = 1;
  const size_t off = out.size() - in.size();
  for (size_t k = out.size(); k-- > 0;) {
    const int64_t coord = out_index % out[k];
    out_index /= out[k];
    if (k < off) continue;
    const int64_t d = in[k - off];
    if (d != 1) offset += coord * in_stride;
    in_stride *= d;
  }
  return offset;
}

StatusOr<std::vector<int64_t>> LegacyBroadcastShape(std::span<const int64_t> a, std::span<const int64_t> b,
                                                    bool broadcast, std::optional<int64_t> axis) {
  const int64_t ra = static_cast<int64_t>(a.size());
  const int64_t rb = static_cast<int64_t>(b.size());
  int64_t nb = 1;
  for (int64_t d : b) nb *= d;
  if (!broadcast) {
    if (std::equal(a.begin(), a.end(), b.begin(), b.end())) return std::vector<int64_t>(b.begin(), b.end());
    return InvalidArgument("shapes ", ShapeToString(a), " and ", ShapeToString(b),
                           " differ and attribute 'broadcast' is 0");
  }
  if (nb == 1 && rb <= ra) return std::vector<int64_t>(a.size(), 1);
  int64_t start = axis.value_or(ra - rb);
  if (start < 0) start += ra;
  if (rb > ra || start < 0 || start + rb > ra) {
    return InvalidArgument("shape ", ShapeToString(b), " does not fit into ", ShapeToString(a), " at axis ",
                           axis.value_or(ra - rb), " (legacy broadcast)");
  }
  std::vector<int64_t> out(a.size(), 1);
  for (int64_t k = 0; k < rb; ++k) {
    if (b[k] != a[start + k] && b[k] != 1) {
      return InvalidArgument("shape ", ShapeToString(b), " does not match ", ShapeToString(a), " at axis ", start + k,
                             ": dim ", b[k], " vs ", a[start + k], " (legacy broadcast)");
    }
    out[start + k] = b[k];
  }
  return out;
}

}  // namespace onnxamp::ops
