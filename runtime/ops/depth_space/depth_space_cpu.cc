// DepthToSpace and SpaceToDepth (CPU, opsets 1-25; DepthToSpace's mode from 11), and DepthToSpace's backward,
// com.onnxamp DepthToSpaceGrad. Each is a reshape to 6-D, a transpose and a reshape back, on [N, C, H, W] of any
// element type, with blocksize b:
//   DepthToSpace DCR (default): [N, b, b, C/b^2, H, W] -> perm (0, 3, 4, 1, 5, 2) -> [N, C/b^2, H*b, W*b]
//   DepthToSpace CRD:           [N, C/b^2, b, b, H, W] -> perm (0, 1, 4, 2, 5, 3) -> the same
//   SpaceToDepth:               [N, C, H/b, b, W/b, b] -> perm (0, 3, 5, 1, 2, 4) -> [N, C*b^2, H/b, W/b]
// DepthToSpaceGrad(dY) (attributes blocksize, mode) is the inverse of DepthToSpace: SpaceToDepth for DCR, and for CRD
// [N, C/b^2, H, b, W, b] -> perm (0, 1, 3, 5, 2, 4) -> [N, C, H, W].
#include <array>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/transpose/transpose.h"

namespace onnxamp::ops {
namespace {

enum class Kind { kDepthToSpace, kSpaceToDepth, kDepthToSpaceGrad };

class DepthSpaceCpu : public exec::OpKernel {
 public:
  DepthSpaceCpu(const exec::KernelInfo& info, Status* st)
      : kind_(info.node.op_type() == "SpaceToDepth"   ? Kind::kSpaceToDepth
              : info.node.op_type() == "DepthToSpace" ? Kind::kDepthToSpace
                                                      : Kind::kDepthToSpaceGrad),
        blocksize_(info.node.GetInt("blocksize", 0)),
        crd_(info.node.GetString("mode", "DCR") == "CRD") {
    const std::string mode = info.node.GetString("mode", "DCR");
    if (blocksize_ <= 0) {
      *st = InvalidArgument("attribute 'blocksize' must be given and positive, got ", blocksize_);
    } else if (mode != "DCR" && mode != "CRD") {
      *st = InvalidArgument("attribute 'mode' must be DCR or CRD, got '", mode, "'");
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x,
                             RequireInput(ctx, 0, kind_ == Kind::kDepthToSpaceGrad ? "dY" : "input"));
    if (x->rank() != 4) {
      return InvalidArgument(InputLabel(ctx, 0, "input"), " must be [N, C, H, W], got ", ShapeToString(x->dims()));
    }
    const int64_t b = blocksize_, n = x->dims()[0], c = x->dims()[1], h = x->dims()[2], w = x->dims()[3];
    std::array<int64_t, 6> view{};
    std::array<int64_t, 6> perm{};
    std::vector<int64_t> out_dims;
    const bool to_space = kind_ == Kind::kDepthToSpace;
    // SpaceToDepth and DCR's backward are the same rearrangement.
    const bool space_to_depth = kind_ == Kind::kSpaceToDepth || (kind_ == Kind::kDepthToSpaceGrad && !crd_);
    // Products of a hostile blocksize with a dim could overflow: multiply with a check.
    auto times = [&](int64_t a, int64_t m) -> StatusOr<int64_t> {
      int64_t r = 0;
      if (__builtin_mul_overflow(a, m, &r)) {
        return InvalidArgument(InputLabel(ctx, 0, "input"), " ", ShapeToString(x->dims()), " with blocksize ", b,
                               ": the output's dims overflow");
      }
      return r;
    };
    if (to_space) {
      if (c % b != 0 || (c / b) % b != 0) {
        return InvalidArgument(InputLabel(ctx, 0, "input"), " has ", c, " channels, not a multiple of blocksize^2 (", b,
                               "^2)");
      }
      const int64_t cb = c / b / b;
      view = crd_ ? std::array<int64_t, 6>{n, cb, b, b, h, w} : std::array<int64_t, 6>{n, b, b, cb, h, w};
      perm = crd_ ? std::array<int64_t, 6>{0, 1, 4, 2, 5, 3} : std::array<int64_t, 6>{0, 3, 4, 1, 5, 2};
      ONNXAMP_ASSIGN_OR_RETURN(const int64_t hb, times(h, b));
      ONNXAMP_ASSIGN_OR_RETURN(const int64_t wb, times(w, b));
      out_dims = {n, cb, hb, wb};
    } else {
      if (h % b != 0 || w % b != 0) {
        return InvalidArgument(InputLabel(ctx, 0, "input"), " has height ", h, " and width ", w,
                               ", not multiples of blocksize ", b);
      }
      view = {n, c, h / b, b, w / b, b};
      perm = space_to_depth ? std::array<int64_t, 6>{0, 3, 5, 1, 2, 4} : std::array<int64_t, 6>{0, 1, 3, 5, 2, 4};
      ONNXAMP_ASSIGN_OR_RETURN(const int64_t cb, times(c, b));
      ONNXAMP_ASSIGN_OR_RETURN(const int64_t cbb, times(cb, b));
      out_dims = {n, cbb, h / b, w / b};
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, x->dtype(), out_dims));
    return TransposeElements(*x, view, perm, y, &ctx.threads());
  }

 private:
  Kind kind_;
  int64_t blocksize_;
  bool crd_;
};

}  // namespace

void RegisterDepthSpaceKernels(exec::KernelRegistry& r) {
  r.Register({"DepthToSpace", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<DepthSpaceCpu>});
  r.Register({"SpaceToDepth", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<DepthSpaceCpu>});
  r.Register(
      {kDepthToSpaceGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, {}, 0, &exec::MakeKernel<DepthSpaceCpu>});
}

}  // namespace onnxamp::ops
