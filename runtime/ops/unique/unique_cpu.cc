// Unique (CPU, opsets 11-25): Unique(X; axis?, sorted = 1) -> Y, indices, inverse_indices, counts: the distinct
// elements of the flattened X (or, with `axis`, the distinct slices along it), sorted ascending (slices
// lexicographically) or in order of first occurrence; indices: the first occurrence of each in X, inverse_indices: for
// each element (slice) of X its position in Y, counts: how often each occurs. NaNs are equal to each other and sort
// last. Numeric, bool and string tensors.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::ops {
namespace {

// Three-way comparison with NaN equal to NaN and above every number.
template <typename T>
int Compare(const T& a, const T& b) {
  if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, bool> || std::is_integral_v<T>) {
    return a < b ? -1 : (b < a ? 1 : 0);
  } else {
    const auto x = Load(a), y = Load(b);
    const bool xn = std::isnan(x), yn = std::isnan(y);
    if (xn || yn) return xn == yn ? 0 : (xn ? 1 : -1);
    return x < y ? -1 : (y < x ? 1 : 0);
  }
}

class UniqueCpu : public exec::OpKernel {
 public:
  UniqueCpu(const exec::KernelInfo& info, Status* st) {
    auto axis = OptionalIntAttribute(info.node, "axis");
    auto sorted = IntAttribute(info.node, "sorted", 1);
    if (!axis.ok() || !sorted.ok()) {
      *st = axis.ok() ? sorted.status() : axis.status();
      return;
    }
    axis_ = *axis;
    sorted_ = *sorted != 0;
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "X"));
    // Items: slices along the axis ([outer, n, inner] around it), or the elements of the flattened X.
    int64_t outer = 1, n = x->num_elements(), inner = 1, axis = -1;
    if (axis_) {
      ONNXAMP_ASSIGN_OR_RETURN(axis, NormalizeAxis(*axis_, x->rank()));
      outer = DimProduct(x->dims(), 0, static_cast<size_t>(axis));
      n = x->dims()[axis];
      inner = DimProduct(x->dims(), static_cast<size_t>(axis) + 1, x->dims().size());
    }
    auto run = [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* v = ElementsOf<T>(*x);
      // Item i's element (o, j): v[(o * n + i) * inner + j].
      auto cmp = [&](int64_t a, int64_t b) {
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t j = 0; j < inner; ++j) {
            const int c = Compare(v[(o * n + a) * inner + j], v[(o * n + b) * inner + j]);
            if (c != 0) return c;
          }
        }
        return 0;
      };
      std::vector<int64_t> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
      // Groups of equal items in sorted order; each group's first occurrence is its smallest index (stable sort).
      std::vector<int64_t> first, count, group_of(static_cast<size_t>(n));
      for (size_t k = 0; k < order.size(); ++k) {
        if (k == 0 || cmp(order[k - 1], order[k]) != 0) {
          first.push_back(order[k]);
          count.push_back(0);
        }
        group_of[static_cast<size_t>(order[k])] = static_cast<int64_t>(first.size()) - 1;
        ++count.back();
      }
      const int64_t groups = static_cast<int64_t>(first.size());
      // Output position of each group: sorted order, or order of first occurrence.
      std::vector<int64_t> position(static_cast<size_t>(groups));
      std::iota(position.begin(), position.end(), 0);
      if (!sorted_) {
        std::vector<int64_t> by_first(static_cast<size_t>(groups));
        std::iota(by_first.begin(), by_first.end(), 0);
        std::sort(by_first.begin(), by_first.end(),
                  [&](int64_t a, int64_t b) { return first[static_cast<size_t>(a)] < first[static_cast<size_t>(b)]; });
        for (int64_t p = 0; p < groups; ++p) position[static_cast<size_t>(by_first[static_cast<size_t>(p)])] = p;
      }
      std::vector<int64_t> y_dims = axis_ ? x->dims() : std::vector<int64_t>{groups};
      if (axis_) y_dims[static_cast<size_t>(axis)] = groups;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, x->dtype(), y_dims));
      T* yv = MutableElementsOf<T>(*y);
      for (int64_t gi = 0; gi < groups; ++gi) {
        const int64_t p = position[static_cast<size_t>(gi)], src = first[static_cast<size_t>(gi)];
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t j = 0; j < inner; ++j) yv[(o * groups + p) * inner + j] = v[(o * n + src) * inner + j];
        }
      }
      auto ints = [&](size_t out, int64_t len, auto value) -> Status {
        if (ctx.num_outputs() <= out || !ctx.output_requested(out)) return Status::Ok();
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * t, ctx.AllocateOutput(out, DType::kInt64, {len}));
        auto tv = t->mutable_values<int64_t>();
        for (int64_t k = 0; k < len; ++k) tv[k] = value(k);
        return Status::Ok();
      };
      std::vector<int64_t> group_at(static_cast<size_t>(groups));  // output position -> group
      for (int64_t gi = 0; gi < groups; ++gi) group_at[static_cast<size_t>(position[static_cast<size_t>(gi)])] = gi;
      ONNXAMP_RETURN_IF_ERROR(
          ints(1, groups, [&](int64_t p) { return first[static_cast<size_t>(group_at[static_cast<size_t>(p)])]; }));
      ONNXAMP_RETURN_IF_ERROR(
          ints(2, n, [&](int64_t i) { return position[static_cast<size_t>(group_of[static_cast<size_t>(i)])]; }));
      return ints(3, groups, [&](int64_t p) { return count[static_cast<size_t>(group_at[static_cast<size_t>(p)])]; });
    };
    if (x->dtype() == DType::kString) return run(TypeTag<std::string>{});
    return DispatchNumericOrBool(x->dtype(), run);
  }

 private:
  std::optional<int64_t> axis_;
  bool sorted_ = true;
};

}  // namespace

void RegisterUniqueKernels(exec::KernelRegistry& r) {
  r.Register({"Unique", "", 11, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<UniqueCpu>});
}

}  // namespace onnxamp::ops
