// DepthToSpace, SpaceToDepth and com.onnxamp DepthToSpaceGrad: the attributes and the per-run checks that turn the
// input's dims into the 6-D view, permutation and output dims of the rearrangement, shared by the CPU kernel
// (depth_space_cpu.cc) and the CUDA kernel (runtime/cuda/ops/tensor/layout_ops_cuda.cc): same checks, same messages.
// See depth_space_cpu.cc for the semantics.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {

// One run's rearrangement: the input viewed as `view` (6-D), transposed by `perm`, is the output of dims `out_dims`.
struct DepthSpaceShape {
  std::array<int64_t, 6> view{};
  std::array<int64_t, 6> perm{};
  std::vector<int64_t> out_dims;
};

class DepthSpaceSpec {
 public:
  enum class Kind { kDepthToSpace, kSpaceToDepth, kDepthToSpaceGrad };

  // Reads blocksize (required, positive) and mode (DCR or CRD; the op type picks the kind); InvalidArgument otherwise.
  Status Parse(const ir::Node& node) {
    kind_ = node.op_type() == "SpaceToDepth"   ? Kind::kSpaceToDepth
            : node.op_type() == "DepthToSpace" ? Kind::kDepthToSpace
                                               : Kind::kDepthToSpaceGrad;
    blocksize_ = node.GetInt("blocksize", 0);
    const std::string mode = node.GetString("mode", "DCR");
    crd_ = mode == "CRD";
    if (blocksize_ <= 0) return InvalidArgument("attribute 'blocksize' must be given and positive, got ", blocksize_);
    if (mode != "DCR" && mode != "CRD") return InvalidArgument("attribute 'mode' must be DCR or CRD, got '", mode, "'");
    return Status::Ok();
  }

  // The role of input 0 in messages.
  const char* input_role() const { return kind_ == Kind::kDepthToSpaceGrad ? "dY" : "input"; }

  // Checks x (rank 4; channels a multiple of blocksize^2, or height and width multiples of blocksize; output dims
  // that do not overflow) and returns the rearrangement.
  StatusOr<DepthSpaceShape> Resolve(const exec::KernelContext& ctx, const ir::Tensor& x) const {
    if (x.rank() != 4) {
      return InvalidArgument(InputLabel(ctx, 0, "input"), " must be [N, C, H, W], got ", ShapeToString(x.dims()));
    }
    const int64_t b = blocksize_, n = x.dims()[0], c = x.dims()[1], h = x.dims()[2], w = x.dims()[3];
    DepthSpaceShape s;
    const bool to_space = kind_ == Kind::kDepthToSpace;
    // SpaceToDepth and DCR's backward are the same rearrangement.
    const bool space_to_depth = kind_ == Kind::kSpaceToDepth || (kind_ == Kind::kDepthToSpaceGrad && !crd_);
    // Products of a hostile blocksize with a dim could overflow: multiply with a check.
    auto times = [&](int64_t a, int64_t m) -> StatusOr<int64_t> {
      int64_t r = 0;
      if (__builtin_mul_overflow(a, m, &r)) {
        return InvalidArgument(InputLabel(ctx, 0, "input"), " ", ShapeToString(x.dims()), " with blocksize ", b,
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
      s.view = crd_ ? std::array<int64_t, 6>{n, cb, b, b, h, w} : std::array<int64_t, 6>{n, b, b, cb, h, w};
      s.perm = crd_ ? std::array<int64_t, 6>{0, 1, 4, 2, 5, 3} : std::array<int64_t, 6>{0, 3, 4, 1, 5, 2};
      ONNXAMP_ASSIGN_OR_RETURN(const int64_t hb, times(h, b));
      ONNXAMP_ASSIGN_OR_RETURN(const int64_t wb, times(w, b));
      s.out_dims = {n, cb, hb, wb};
    } else {
      if (h % b != 0 || w % b != 0) {
        return InvalidArgument(InputLabel(ctx, 0, "input"), " has height ", h, " and width ", w,
                               ", not multiples of blocksize ", b);
      }
      s.view = {n, c, h / b, b, w / b, b};
      s.perm = space_to_depth ? std::array<int64_t, 6>{0, 3, 5, 1, 2, 4} : std::array<int64_t, 6>{0, 1, 3, 5, 2, 4};
      ONNXAMP_ASSIGN_OR_RETURN(const int64_t cb, times(c, b));
      ONNXAMP_ASSIGN_OR_RETURN(const int64_t cbb, times(cb, b));
      s.out_dims = {n, cbb, h / b, w / b};
    }
    return s;
  }

 private:
  Kind kind_ = Kind::kDepthToSpace;
  int64_t blocksize_ = 0;
  bool crd_ = false;
};

}  // namespace onnxamp::ops
