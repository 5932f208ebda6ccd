// Pad (CPU): pads (or, with negative pads, crops) every axis, any element type (strings included), opsets 1-25.
//
// Versions: opset 1 reads the `paddings` attribute and the float `value`; 2-10 the `pads` attribute and `value`;
// from 11 the int64 input `pads` and the optional input `constant_value` (a scalar of the data's type); from 18
// the optional input `axes` says which axes the pads refer to. Modes: constant, edge, reflect, and wrap (19+).
// pads are [begin_0, begin_1, ..., end_0, end_1, ...]. A negative pad crops that side first; the other side is
// then padded from the cropped data, as ONNX Runtime does. Edge, reflect and wrap need a non-empty axis.
//
// Every output coordinate maps, per axis, to a source index or to "fill"; the inner axis's map is cut into runs
// so that contiguous stretches are one memcpy.
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/pad/pad.h"

namespace onnxamp::ops {
namespace {

// One run of the inner axis: `len` output elements from `out`, reading from `src` onward (consecutive), or the
// fill value when src < 0.
struct Run {
  int64_t out;
  int64_t len;
  int64_t src;
};

class PadCpu : public exec::OpKernel {
 public:
  PadCpu(const exec::KernelInfo& info, Status* status) { *status = spec_.Parse(info.node, info.opset); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "data"));
    const size_t rank = x->dims().size();
    ONNXAMP_ASSIGN_OR_RETURN(const PadShape shape, spec_.Resolve(ctx, *x));
    const ir::Tensor* value = shape.value;
    return DispatchByElementSize(x->dtype(), "Pad", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      T fill{};
      if (value) {
        fill = ElementsOf<T>(*value)[0];
      } else if constexpr (!std::is_same_v<T, std::string> && !std::is_same_v<T, Bytes16>) {
        // The float `value` of opsets 1-10, stored as the data's type (whose size is sizeof(T)).
        if (spec_.value_attr() != 0.0f) ONNXAMP_RETURN_IF_ERROR(StorePadValue(x->dtype(), spec_.value_attr(), &fill));
      }
      // Allocation first: it refuses sizes that cannot fit before the index maps are built.
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, x->dtype(), shape.out_dims));
      if (y->num_elements() == 0) return Status::Ok();
      std::vector<std::vector<int64_t>> maps(rank);
      for (size_t k = 0; k < rank; ++k) maps[k] = PadAxisMap(x->dims()[k], shape.begin[k], shape.end[k], spec_.mode());
      PadRows(ElementsOf<T>(*x), MutableElementsOf<T>(*y), x->dims(), maps, fill,
              std::is_same_v<T, std::string> ? nullptr : &ctx.threads());
      return Status::Ok();
    });
  }

 private:
  // Fills the output row by row: the outer axes' maps give the source row (or fill), the inner runs the columns.
  template <typename T>
  static void PadRows(const T* src, T* dst, const std::vector<int64_t>& in_dims,
                      const std::vector<std::vector<int64_t>>& maps, const T& fill, exec::ThreadPool* pool) {
    const size_t rank = in_dims.size();
    if (rank == 0) {
      dst[0] = src[0];
      return;
    }
    const std::vector<int64_t> in_strides = ContiguousStrides(in_dims);
    const std::vector<int64_t>& inner_map = maps.back();
    std::vector<Run> runs;
    for (int64_t o = 0; o < static_cast<int64_t>(inner_map.size()); ++o) {
      const int64_t s = inner_map[o];
      if (!runs.empty()) {
        Run& r = runs.back();
        const bool extends = (s < 0 && r.src < 0) || (s >= 0 && r.src >= 0 && r.src + r.len == s);
        if (extends) {
          ++r.len;
          continue;
        }
      }
      runs.push_back({o, 1, s});
    }
    const int64_t inner = static_cast<int64_t>(inner_map.size());
    int64_t rows = 1;
    for (size_t k = 0; k + 1 < rank; ++k) rows *= static_cast<int64_t>(maps[k].size());
    auto run_rows = [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        T* d = dst + row * inner;
        int64_t rest = row, base = 0;
        bool filled = false;
        for (size_t k = rank - 1; k-- > 0;) {
          const int64_t n = static_cast<int64_t>(maps[k].size());
          const int64_t s = maps[k][rest % n];
          rest /= n;
          if (s < 0) filled = true;
          base += s * in_strides[k];
        }
        if (filled) {
          std::fill_n(d, inner, fill);
          continue;
        }
        for (const Run& r : runs) {
          if (r.src < 0) {
            std::fill_n(d + r.out, r.len, fill);
          } else {
            CopyElements(d + r.out, src + base + r.src, r.len);
          }
        }
      }
    };
    const int64_t grain = std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(inner, 1));
    if (pool && rows >= 2 * grain) {
      pool->ParallelFor(rows, grain, run_rows);
    } else {
      run_rows(0, rows);
    }
  }

  PadSpec spec_;
};

}  // namespace

void RegisterPadKernels(exec::KernelRegistry& r) {
  r.Register({"Pad", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<PadCpu>});
}

}  // namespace onnxamp::ops
