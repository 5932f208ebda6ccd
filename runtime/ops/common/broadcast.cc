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

// The multidirectional broadcast of N shapes; `Shapes` is a vector of vectors or a span of spans.
template <typename Shapes>
StatusOr<std::vector<int64_t>> BroadcastAll(const Shapes& shapes) {
  std::vector<int64_t> out;
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  out.reserve(rank);
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

// The shapes as spans over the caller's vectors.
std::vector<std::span<const int64_t>> Spans(const std::vector<std::vector<int64_t>>& shapes) {
  return {shapes.begin(), shapes.end()};
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
  return BroadcastAll(shapes);
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
  return Make(Spans(input_shapes));
}

StatusOr<BroadcastPlan> BroadcastPlan::Make(std::span<const std::span<const int64_t>> input_shapes) {
  BroadcastPlan plan;
  ONNXAMP_ASSIGN_OR_RETURN(plan.output_dims_, BroadcastAll(input_shapes));
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
  plan.Finish(Spans(input_shapes));
  return plan;
}

void BroadcastPlan::Finish(std::span<const std::span<const int64_t>> input_shapes) {
  num_inputs_ = input_shapes.size();
  const size_t out_rank = output_dims_.size();
  num_elements_ = 1;
  size_t kept = 0;  // output dims other than 1
  for (int64_t d : output_dims_) {
    num_elements_ *= d;
    kept += d != 1 ? 1 : 0;
  }
  // The merged dims fill dims_[pos, cap) and each input's row of strides_ from the right, walking the output dims
  // from the innermost outwards. Size-1 output dims are dropped (every input has stride 0 there). Dim k merges into
  // the merged dim after it when, for every input, its stride at k is that dim's stride times its size: that covers
  // "both broadcast" (0 == 0) and "both contiguous". A scalar output (or all dims 1) keeps one dim of 1, stride 0.
  const size_t cap = std::max<size_t>(kept, 1);
  dims_.assign(cap, 1);
  strides_.assign(num_inputs_ * cap, 0);
  // Per input: its stride at output dim k (`stride`), and the element count of its dims after k (`inner`).
  constexpr size_t kInlineInputs = 4;
  int64_t buf[2 * kInlineInputs];
  std::vector<int64_t> heap;
  int64_t* stride = buf;
  if (num_inputs_ > kInlineInputs) {
    heap.resize(2 * num_inputs_);
    stride = heap.data();
  }
  int64_t* inner = stride + num_inputs_;
  std::fill(inner, inner + num_inputs_, 1);
  size_t pos = cap;
  for (size_t k = out_rank; k-- > 0;) {
    const int64_t d = output_dims_[k];
    if (d == 1) continue;
    bool mergeable = pos < cap;
    for (size_t i = 0; i < num_inputs_; ++i) {
      const std::span<const int64_t> in = input_shapes[i];
      ONNXAMP_CHECK(in.size() <= out_rank, "rank ", in.size(), " > ", out_rank);
      const size_t off = out_rank - in.size();
      const int64_t in_dim = k >= off ? in[k - off] : 1;
      ONNXAMP_CHECK(in_dim == 1 || in_dim == d, "dim ", in_dim, " vs ", d);
      stride[i] = in_dim == 1 ? 0 : inner[i];
      inner[i] *= in_dim;
      mergeable = mergeable && stride[i] == strides_[i * cap + pos] * dims_[pos];
    }
    if (mergeable) {
      dims_[pos] *= d;
      continue;
    }
    --pos;
    dims_[pos] = d;
    for (size_t i = 0; i < num_inputs_; ++i) strides_[i * cap + pos] = stride[i];
  }
  if (pos == cap) pos = cap - 1;  // no dim other than 1: the one dim of 1
  if (pos == 0) return;
  // Move the merged dims to the front.
  const size_t rank = cap - pos;
  dims_.erase(dims_.begin(), dims_.begin() + static_cast<std::ptrdiff_t>(pos));
  for (size_t i = 0; i < num_inputs_; ++i) {
    const auto row = strides_.begin() + static_cast<std::ptrdiff_t>(i * cap);
    std::copy(row + static_cast<std::ptrdiff_t>(pos), row + static_cast<std::ptrdiff_t>(cap),
              strides_.begin() + static_cast<std::ptrdiff_t>(i * rank));
  }
  strides_.resize(num_inputs_ * rank);
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
