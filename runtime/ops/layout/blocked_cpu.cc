// Ops on the blocked channel layout (CPU, float, oneDNN), made by the graph optimizer's layout pass (see
// graph_optimizer.h) between consecutive convolutions and poolings, so that activations are reordered into oneDNN's
// blocked layout once where such a chain starts and back once where it ends instead of around every op. A blocked
// tensor of logical shape [N, C, spatial...] is an ordinary tensor of shape [N, ceil(C / b), spatial..., b] whose
// channel c sits in block c / b, lane c % b; the lanes past C are zero.
//
// - BlockedConv: FusedConv (Y = activation(conv(X, W) + B + Z)) with attributes x_block, z_block, y_block giving
//   the layout of X, Z and Y (0 plain, else b). Z has Y's logical shape (no broadcasting).
// - BlockedMaxPool, BlockedAveragePool: MaxPool (without Indices) and AveragePool on blocked X and Y, attribute
//   `block`. MaxPool runs on BlockedMaxPoolAvx2 (blocked_pool_avx2.h) where the CPU has AVX2, else on oneDNN.
// - BlockedGlobalAveragePool: blocked X -> plain Y [N, C, 1, ...], attributes `block` and `channels` (C).
#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/common/conv_onednn.h"
#include "runtime/ops/common/elementwise_half.h"
#include "runtime/ops/common/gemm.h"
#include "runtime/ops/layout/blocked_conv_avx2.h"
#include "runtime/ops/layout/blocked_pool_avx2.h"

namespace onnxamp::ops {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

Status GetBlockAttr(const ir::Node& node, const char* name, bool allow_plain, int64_t* out) {
  ONNXAMP_RETURN_IF_ERROR(GetIntAttr(node, name, 0, out));
  if (!((*out == 0 && allow_plain) || *out == 8 || *out == 16)) {
    return InvalidArgument("attribute '", name, "' is ", *out, ", expected ", allow_plain ? "0, " : "", "8 or 16");
  }
  return Status::Ok();
}

// The logical shape [N, C, spatial...] of a blocked tensor of shape [N, Cb, spatial..., b], given C.
StatusOr<std::vector<int64_t>> LogicalDims(const ir::Tensor& t, const char* what, int64_t channels, int64_t block) {
  const std::vector<int64_t>& d = t.dims();
  if (d.size() < 4 || d.back() != block || d[1] != CeilDiv(channels, block)) {
    return InvalidArgument("input ", what, " has shape ", ShapeToString(d), ", expected a blocked tensor [N, ",
                           CeilDiv(channels, block), ", spatial..., ", block, "] of ", channels, " channels");
  }
  std::vector<int64_t> out(d.begin(), d.end() - 1);
  out[1] = channels;
  return out;
}

// The shape of a tensor of logical shape [N, C, spatial...] in layout `block` (0 plain).
std::vector<int64_t> LayoutDims(const std::vector<int64_t>& logical, int64_t block) {
  if (block == 0) return logical;
  std::vector<int64_t> out = logical;
  out[1] = CeilDiv(logical[1], block);
  out.push_back(block);
  return out;
}

// Copies between the plain [N, C, S] and the blocked [N, ceil(C / b), S, b] layout (S positions per channel); the
// blocked side's padding lanes are written as zeros.
void BlockedToPlain(const float* src, float* dst, int64_t n, int64_t c, int64_t s, int64_t b) {
  const int64_t cb = CeilDiv(c, b);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* from = src + ((i * cb + ch / b) * s) * b + ch % b;
      float* to = dst + (i * c + ch) * s;
      for (int64_t p = 0; p < s; ++p) to[p] = from[p * b];
    }
  }
}

void PlainToBlocked(const float* src, float* dst, int64_t n, int64_t c, int64_t s, int64_t b) {
  const int64_t cb = CeilDiv(c, b);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t blk = 0; blk < cb; ++blk) {
      float* to = dst + (i * cb + blk) * s * b;
      for (int64_t p = 0; p < s; ++p) {
        for (int64_t l = 0; l < b; ++l) {
          const int64_t ch = blk * b + l;
          to[p * b + l] = ch < c ? src[(i * c + ch) * s + p] : 0.0f;
        }
      }
    }
  }
}

Status NeedOneDnn(const ir::Node& node) {
  if (!OneDnnAvailable()) return Unimplemented(node.op_type(), " needs oneDNN, which is not part of this build");
  return Status::Ok();
}

class BlockedConvCpu : public exec::OpKernel {
 public:
  BlockedConvCpu(const exec::KernelInfo& info, Status* st) {
    if (!(*st = NeedOneDnn(info.node)).ok()) return;
    if (!(*st = ParseWindowAttrs(info.node, WindowAttrSpec{}, &attrs_)).ok()) return;
    if (!(*st = GetIntAttr(info.node, "group", 1, &group_)).ok()) return;
    if (group_ < 1) {
      *st = InvalidArgument("attribute 'group' must be >= 1, got ", group_);
      return;
    }
    if (!(*st = GetBlockAttr(info.node, "x_block", true, &layouts_.x)).ok()) return;
    if (!(*st = GetBlockAttr(info.node, "z_block", true, &layouts_.z)).ok()) return;
    if (!(*st = GetBlockAttr(info.node, "y_block", true, &layouts_.y)).ok()) return;
    const std::string act = info.node.GetString("activation", "");
    if (act != "" && act != "Relu") {
      *st = InvalidArgument("attribute 'activation' is '", act, "', expected 'Relu' or empty");
      return;
    }
    relu_ = act == "Relu";
    if (!(*st = ParseRoundTo(info.node, &round_half_)).ok()) return;
    const ir::Value* w = info.node.input(1);
    constant_w_ = w && w->initializer() && !w->is_graph_input();
    const ir::Value* b = info.node.inputs().size() > 2 ? info.node.input(2) : nullptr;
    constant_wb_ = constant_w_ && (!b || (b->initializer() && !b->is_graph_input()));
    has_z_ = info.node.inputs().size() > 3 && info.node.input(3);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    const ir::Tensor* w = ctx.input(1);
    const ir::Tensor* b = ctx.input(2);
    const ir::Tensor* z = ctx.input(3);
    if (!x || !w) return InvalidArgument("inputs X and W are required");
    for (const ir::Tensor* t : {w, b, z}) {
      if (t && t->dtype() != DType::kFloat32) {
        return InvalidArgument("inputs W, B and Z must be float32 like X, got ", DTypeName(t->dtype()));
      }
    }
    ONNXAMP_ASSIGN_OR_RETURN(std::shared_ptr<const Resolved> r, Resolve(*x, *w, b));
    if (z && z->dims() != r->z_dims) return ComputeBroadcastSum(ctx, *r, *x, *w, b, *z);
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, DType::kFloat32, r->y_dims));
    if (y->num_elements() == 0) return Status::Ok();
    if (r->avx2) {
      // Packed once with the geometry when W and B are initializers, else from this run's values.
      std::shared_ptr<const BlockedConvAvx2Weights> packed = r->packed;
      if (!packed) packed = std::make_shared<BlockedConvAvx2Weights>(PackWeights(r->p, *w, b));
      BlockedConvAvx2(r->p, layouts_, x->values<float>().data(), *packed, z ? z->values<float>().data() : nullptr,
                      relu_, y->mutable_values<float>().data(), ctx.threads());
    } else {
      ONNXAMP_RETURN_IF_ERROR(onednn_.Run(r->p, x->values<float>().data(), w->values<float>().data(), false,
                                          b ? b->values<float>().data() : nullptr, y->mutable_values<float>().data(),
                                          ctx.threads(), ConvPostOps{z ? z->values<float>().data() : nullptr, relu_},
                                          constant_w_, layouts_));
    }
    if (round_half_) RoundToHalfInPlace(y->mutable_values<float>().data(), y->num_elements(), ctx.threads());
    return Status::Ok();
  }

 private:
  struct Resolved {
    std::vector<int64_t> x_dims, w_dims, b_dims;
    ConvProblem p;
    std::vector<int64_t> out_dims;  // the convolution's logical output shape
    std::vector<int64_t> y_dims, z_dims;
    bool avx2 = false;                                     // BlockedConvAvx2 runs it
    std::shared_ptr<const BlockedConvAvx2Weights> packed;  // its weights, when W and B are initializers
  };

  // Z of another shape than the convolution's output (the graph did not say): the convolution into a plain
  // temporary, then Y = act(conv + Z) broadcast as Add broadcasts, in plain layout, then into Y's layout.
  Status ComputeBroadcastSum(exec::KernelContext& ctx, const Resolved& r, const ir::Tensor& x, const ir::Tensor& w,
                             const ir::Tensor* b, const ir::Tensor& z) const {
    const int64_t m = r.p.m;
    std::vector<int64_t> z_logical = z.dims();
    ir::Tensor z_plain;
    if (layouts_.z != 0) {
      ONNXAMP_ASSIGN_OR_RETURN(z_logical, LogicalDims(z, "Z", m, layouts_.z));
      z_plain = ir::Tensor::Uninitialized(DType::kFloat32, z_logical);
      BlockedToPlain(z.values<float>().data(), z_plain.mutable_values<float>().data(), z_logical[0], m,
                     z_plain.num_elements() / std::max<int64_t>(1, z_logical[0] * m), layouts_.z);
    }
    const float* pz = layouts_.z != 0 ? z_plain.values<float>().data() : z.values<float>().data();
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> out_dims, BroadcastShapes(r.out_dims, z_logical));
    if (layouts_.y != 0 && (out_dims.size() != r.out_dims.size() || out_dims[1] != m)) {
      return InvalidArgument("input Z ", ShapeToString(z_logical), " broadcasts the convolution's output ",
                             ShapeToString(r.out_dims), " to ", ShapeToString(out_dims),
                             ", which the blocked output cannot hold");
    }
    ir::Tensor conv = ir::Tensor::Uninitialized(DType::kFloat32, r.out_dims);
    if (conv.num_elements() > 0) {
      ONNXAMP_RETURN_IF_ERROR(onednn_.Run(r.p, x.values<float>().data(), w.values<float>().data(), false,
                                          b ? b->values<float>().data() : nullptr, conv.mutable_values<float>().data(),
                                          ctx.threads(), ConvPostOps{}, constant_w_, ConvLayouts{layouts_.x, 0, 0}));
    }
    if (round_half_) RoundToHalfInPlace(conv.mutable_values<float>().data(), conv.num_elements(), ctx.threads());
    ir::Tensor sum = ir::Tensor::Uninitialized(DType::kFloat32, out_dims);
    const float* pc = conv.values<float>().data();
    float* ps = sum.mutable_values<float>().data();
    for (int64_t i = 0; i < sum.num_elements(); ++i) {
      float v = pc[BroadcastInputOffset(r.out_dims, out_dims, i)] + pz[BroadcastInputOffset(z_logical, out_dims, i)];
      if (relu_) v = v > 0 ? v : (v == v ? 0.0f : v);
      ps[i] = v;
    }
    if (round_half_) RoundToHalfInPlace(ps, sum.num_elements(), ctx.threads());
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, DType::kFloat32, LayoutDims(out_dims, layouts_.y)));
    if (layouts_.y == 0) {
      std::copy_n(ps, sum.num_elements(), y->mutable_values<float>().data());
    } else if (out_dims[0] > 0) {
      PlainToBlocked(ps, y->mutable_values<float>().data(), out_dims[0], m,
                     sum.num_elements() / std::max<int64_t>(1, out_dims[0] * m), layouts_.y);
    }
    return Status::Ok();
  }

  // Checks the shapes and resolves the geometry; kept for the last input shapes.
  StatusOr<std::shared_ptr<const Resolved>> Resolve(const ir::Tensor& x, const ir::Tensor& w,
                                                    const ir::Tensor* b) const {
    const std::vector<int64_t> b_dims = b ? b->dims() : std::vector<int64_t>{};
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (resolved_ && resolved_->x_dims == x.dims() && resolved_->w_dims == w.dims() && resolved_->b_dims == b_dims) {
        return resolved_;
      }
    }
    if (w.rank() < 3 || w.rank() > 5) {
      return InvalidArgument("input W has shape ", ShapeToString(w.dims()), ", expected 1 to 3 spatial dims");
    }
    const int64_t c = w.dims()[1] * group_, m = w.dims()[0];
    std::vector<int64_t> logical = x.dims();
    if (layouts_.x != 0) {
      ONNXAMP_ASSIGN_OR_RETURN(logical, LogicalDims(x, "X", c, layouts_.x));
    }
    if (logical.size() != w.dims().size() || logical[1] != c) {
      return InvalidArgument("input X has logical shape ", ShapeToString(logical), ", expected [N, ", c,
                             ", spatial...] for W ", ShapeToString(w.dims()), " with group ", group_);
    }
    if (m % group_ != 0) {
      return InvalidArgument("input W ", ShapeToString(w.dims()), " has ", m,
                             " output channels, not a multiple of group ", group_);
    }
    if (b && (b->rank() != 1 || b->dims()[0] != m)) {
      return InvalidArgument("input B has shape ", ShapeToString(b->dims()), ", expected [", m, "]");
    }
    const std::vector<int64_t> in(logical.begin() + 2, logical.end()), kernel(w.dims().begin() + 2, w.dims().end());
    if (!attrs_.kernel_shape.empty() && attrs_.kernel_shape != kernel) {
      return InvalidArgument("attribute 'kernel_shape' ", ShapeToString(attrs_.kernel_shape), " differs from W's ",
                             ShapeToString(kernel));
    }
    auto r = std::make_shared<Resolved>();
    r->x_dims = x.dims();
    r->w_dims = w.dims();
    r->b_dims = b_dims;
    r->p = ConvProblem{logical[0], c, m, group_, {}};
    ONNXAMP_ASSIGN_OR_RETURN(r->p.geo, ForwardGeometry(attrs_, in, kernel));
    std::vector<int64_t> out = {logical[0], m};
    out.insert(out.end(), r->p.geo.out.begin(), r->p.geo.out.end());
    r->out_dims = out;
    r->y_dims = LayoutDims(out, layouts_.y);
    r->z_dims = LayoutDims(out, layouts_.z);
    r->avx2 = BlockedConvAvx2Applies(r->p, layouts_, has_z_);
    if (r->avx2 && constant_wb_) r->packed = std::make_shared<BlockedConvAvx2Weights>(PackWeights(r->p, w, b));
    std::lock_guard<std::mutex> lock(mu_);
    resolved_ = r;
    return std::shared_ptr<const Resolved>(std::move(r));
  }

  // The AVX2 kernel's arrangement of W and B.
  BlockedConvAvx2Weights PackWeights(const ConvProblem& p, const ir::Tensor& w, const ir::Tensor* b) const {
    return BlockedConvAvx2PackWeights(p, layouts_, w.values<float>().data(), b ? b->values<float>().data() : nullptr);
  }

  WindowAttrs attrs_;
  int64_t group_ = 1;
  bool relu_ = false;
  bool round_half_ = false;  // round_to FLOAT16
  bool constant_w_ = false;
  bool constant_wb_ = false;  // W and B (if any) are initializers
  bool has_z_ = false;        // the node has input Z
  ConvLayouts layouts_;
  OneDnnConv onednn_;
  mutable std::mutex mu_;
  mutable std::shared_ptr<const Resolved> resolved_;  // guarded by mu_
};

class BlockedPoolCpu : public exec::OpKernel {
 public:
  BlockedPoolCpu(const exec::KernelInfo& info, bool max, Status* st) : max_(max) {
    if (!(*st = NeedOneDnn(info.node)).ok()) return;
    WindowAttrSpec spec;
    spec.kernel_shape_required = true;
    if (!(*st = ParseWindowAttrs(info.node, spec, &attrs_)).ok()) return;
    if (!(*st = GetBlockAttr(info.node, "block", false, &block_)).ok()) return;
    int64_t ceil_mode = 0, count_include_pad = 0;
    if (!(*st = GetIntAttr(info.node, "ceil_mode", 0, &ceil_mode)).ok()) return;
    if (!max && !(*st = GetIntAttr(info.node, "count_include_pad", 0, &count_include_pad)).ok()) return;
    if ((ceil_mode != 0 && ceil_mode != 1) || (count_include_pad != 0 && count_include_pad != 1)) {
      *st = InvalidArgument("attributes 'ceil_mode' and 'count_include_pad' must be 0 or 1");
      return;
    }
    ceil_mode_ = ceil_mode == 1;
    kind_ = max ? PoolKind::kMax : count_include_pad ? PoolKind::kAverageIncludePad : PoolKind::kAverageExcludePad;
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument("input X is required");
    const size_t nsp = attrs_.kernel_shape.size();
    if (x->rank() != static_cast<int64_t>(nsp) + 3 || x->dims().back() != block_) {
      return InvalidArgument("input X has shape ", ShapeToString(x->dims()), ", expected a blocked tensor [N, Cb, ",
                             nsp, " spatial dims, ", block_, "]");
    }
    const std::vector<int64_t> in(x->dims().begin() + 2, x->dims().end() - 1);
    ONNXAMP_ASSIGN_OR_RETURN(const WindowGeometry g, ForwardGeometry(attrs_, in, attrs_.kernel_shape, ceil_mode_));
    if (kind_ == PoolKind::kAverageIncludePad) {
      // oneDNN divides by the kernel size; ours differs only where a ceil-mode window passes the end padding.
      for (size_t d = 0; d < g.rank(); ++d) {
        const int64_t k_eff = (g.kernel[d] - 1) * g.dilation[d] + 1;
        if ((g.out[d] - 1) * g.stride[d] + k_eff > g.in[d] + g.pad_begin[d] + g.pad_end[d]) {
          return Unimplemented("AveragePool with count_include_pad and a ceil-mode window past the padding");
        }
      }
    }
    std::vector<int64_t> out_dims = {x->dims()[0], x->dims()[1]};
    out_dims.insert(out_dims.end(), g.out.begin(), g.out.end());
    out_dims.push_back(block_);
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, DType::kFloat32, out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    if (kind_ == PoolKind::kMax && BlockedMaxPoolAvx2Applies(g, block_)) {
      BlockedMaxPoolAvx2(g, x->dims()[0], x->dims()[1], block_, x->values<float>().data(),
                         y->mutable_values<float>().data(), ctx.threads());
      return Status::Ok();
    }
    return onednn_.RunBlocked(kind_, x->dims()[0], x->dims()[1] * block_, block_, g, x->values<float>().data(),
                              y->mutable_values<float>().data(), ctx.threads());
  }

 private:
  bool max_;
  WindowAttrs attrs_;
  int64_t block_ = 16;
  bool ceil_mode_ = false;
  PoolKind kind_ = PoolKind::kMax;
  OneDnnPool onednn_;
};

class BlockedMaxPoolCpu : public BlockedPoolCpu {
 public:
  BlockedMaxPoolCpu(const exec::KernelInfo& info, Status* st) : BlockedPoolCpu(info, true, st) {}
};

class BlockedAveragePoolCpu : public BlockedPoolCpu {
 public:
  BlockedAveragePoolCpu(const exec::KernelInfo& info, Status* st) : BlockedPoolCpu(info, false, st) {}
};

class BlockedGlobalAveragePoolCpu : public exec::OpKernel {
 public:
  BlockedGlobalAveragePoolCpu(const exec::KernelInfo& info, Status* st) {
    if (!(*st = GetBlockAttr(info.node, "block", false, &block_)).ok()) return;
    if (!(*st = GetIntAttr(info.node, "channels", 0, &channels_)).ok()) return;
    if (channels_ < 1) *st = InvalidArgument("attribute 'channels' must be >= 1, got ", channels_);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument("input X is required");
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> logical, LogicalDims(*x, "X", channels_, block_));
    const int64_t n = logical[0], cb = x->dims()[1], b = block_;
    int64_t size = 1;
    for (size_t d = 2; d < logical.size(); ++d) {
      size *= logical[d];
      logical[d] = 1;
    }
    if (size == 0 && n > 0) {
      return InvalidArgument("input X ", ShapeToString(x->dims()), " has no spatial elements to pool");
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, DType::kFloat32, logical));
    const float* px = x->values<float>().data();
    float* py = y->mutable_values<float>().data();
    const int64_t c = channels_;
    // Every (image, channel block) sums its positions lane by lane, each channel in position order.
    ctx.threads().ParallelFor(n * cb, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(size * b, 1)),
                              [&](int64_t begin, int64_t end) {
                                float sum[16];
                                for (int64_t i = begin; i < end; ++i) {
                                  const float* p = px + i * size * b;
                                  std::fill_n(sum, b, 0.0f);
                                  for (int64_t s = 0; s < size; ++s) {
                                    for (int64_t l = 0; l < b; ++l) sum[l] += p[s * b + l];
                                  }
                                  const int64_t image = i / cb, c0 = (i % cb) * b;
                                  const int64_t lanes = std::min(b, c - c0);
                                  for (int64_t l = 0; l < lanes; ++l) {
                                    py[image * c + c0 + l] = sum[l] / static_cast<float>(size);
                                  }
                                }
                              });
    return Status::Ok();
  }

 private:
  int64_t block_ = 16;
  int64_t channels_ = 0;
};

}  // namespace

void RegisterChannelsLastKernels(exec::KernelRegistry& r);  // channels_last_cpu.cc

void RegisterLayoutKernels(exec::KernelRegistry& r) {
  RegisterChannelsLastKernels(r);
  const std::vector<DType> f32 = {DType::kFloat32};
  const char* d = exec::kInternalDomain;
  r.Register({exec::kBlockedConvOp, d, 1, 1, exec::Device::kCpu, f32, 0, &exec::MakeKernel<BlockedConvCpu>});
  r.Register({exec::kBlockedMaxPoolOp, d, 1, 1, exec::Device::kCpu, f32, 0, &exec::MakeKernel<BlockedMaxPoolCpu>});
  r.Register(
      {exec::kBlockedAveragePoolOp, d, 1, 1, exec::Device::kCpu, f32, 0, &exec::MakeKernel<BlockedAveragePoolCpu>});
  r.Register({exec::kBlockedGlobalAveragePoolOp, d, 1, 1, exec::Device::kCpu, f32, 0,
              &exec::MakeKernel<BlockedGlobalAveragePoolCpu>});
}

}  // namespace onnxamp::ops
