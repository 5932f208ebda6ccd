// Range (CPU, opsets 11-25): [start, start + delta, ...) up to `limit` (exclusive), from three scalars of one
// numeric type. The count is max(ceil((limit - start) / delta), 0), computed exactly for integers (128-bit) and
// in double for float types; element i is start + i * delta (in double for float types, rounded once on store).
// A zero delta or a non-finite count is an error; a count too large for memory is refused by the allocation.
#include <cmath>
#include <limits>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {
namespace {

class RangeCpu : public exec::OpKernel {
 public:
  RangeCpu(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const char* roles[] = {"start", "limit", "delta"};
    const ir::Tensor* in[3];
    for (size_t i = 0; i < 3; ++i) {
      ONNXAMP_ASSIGN_OR_RETURN(in[i], RequireInput(ctx, i, roles[i]));
      if (in[i]->num_elements() != 1) {
        return InvalidArgument(InputLabel(ctx, i, roles[i]), " must be a scalar, got shape ",
                               ShapeToString(in[i]->dims()));
      }
      if (in[i]->dtype() != in[0]->dtype()) {
        return InvalidArgument(InputLabel(ctx, i, roles[i]), " has type ", DTypeName(in[i]->dtype()),
                               " but start has type ", DTypeName(in[0]->dtype()));
      }
    }
    const DType dtype = in[0]->dtype();
    return DispatchNumeric(dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T start = in[0]->values<T>()[0], limit = in[1]->values<T>()[0], delta = in[2]->values<T>()[0];
      int64_t count = 0;
      if constexpr (std::is_integral_v<T>) {
        if (delta == 0) return InvalidArgument("delta is 0");
        const __int128 span = static_cast<__int128>(limit) - static_cast<__int128>(start);
        const __int128 d = delta;
        // ceil(span / d) for span and d of the same sign; 0 otherwise.
        __int128 n = 0;
        if ((span > 0 && d > 0) || (span < 0 && d < 0)) n = (span + d - (d > 0 ? 1 : -1)) / d;
        count = static_cast<int64_t>(n);  // |n| <= 2^64: fits for all but uint64 extremes
        if (n > std::numeric_limits<int64_t>::max()) {
          return OutOfRange("Range from ", static_cast<double>(start), " to ", static_cast<double>(limit), " by ",
                            static_cast<double>(delta), " has too many elements");
        }
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, dtype, {count}));
        T* out = y->template mutable_values<T>().data();
        for (int64_t i = 0; i < count; ++i) out[i] = static_cast<T>(static_cast<__int128>(start) + i * d);
      } else {
        const double s = static_cast<double>(Load<T>(start)), l = static_cast<double>(Load<T>(limit)),
                     dl = static_cast<double>(Load<T>(delta));
        if (dl == 0) return InvalidArgument("delta is 0");
        const double n = std::ceil((l - s) / dl);
        if (!std::isfinite(n)) {
          return InvalidArgument("Range from ", s, " to ", l, " by ", dl, " has a non-finite element count");
        }
        if (n >= 9.2e18) return OutOfRange("Range from ", s, " to ", l, " by ", dl, " has ", n, " elements");
        count = n > 0 ? static_cast<int64_t>(n) : 0;
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, dtype, {count}));
        T* out = y->template mutable_values<T>().data();
        for (int64_t i = 0; i < count; ++i)
          out[i] = Store<T>(static_cast<ComputeType<T>>(s + static_cast<double>(i) * dl));
      }
      return Status::Ok();
    });
  }
};

}  // namespace

void RegisterRangeKernels(exec::KernelRegistry& r) {
  const std::vector<DType> numeric = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                                      DType::kInt8,    DType::kInt16,   DType::kInt32,   DType::kInt64,
                                      DType::kUint8,   DType::kUint16,  DType::kUint32,  DType::kUint64};
  r.Register({"Range", "", 11, 25, exec::Device::kCpu, numeric, 0, &exec::MakeKernel<RangeCpu>});
}

}  // namespace onnxamp::ops
