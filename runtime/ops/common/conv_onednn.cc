// oneDNN convolution and pooling on plain NC<spatial> float tensors (see conv_onednn.h).
//
// The convolution lets oneDNN choose its preferred layouts (blocked channels on AVX-512 machines) and reorders the
// user's plain tensors into them and back when they differ; the reorders are cached with the primitive. Work is
// split over the session's threads (see onednn.h): convolutions by image blocks, or by output-channel or group
// blocks when there are fewer images than threads; pooling by blocks of (image, channel) planes.
#include "runtime/ops/common/conv_onednn.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "runtime/ops/common/onednn.h"

namespace onnxamp::ops {

#ifdef ONNXAMP_WITH_DNNL
namespace {

using dnnl::memory;

memory::format_tag PlainTag(size_t ndims) {
  switch (ndims) {
    case 3:
      return memory::format_tag::ncw;
    case 4:
      return memory::format_tag::nchw;
    default:
      return memory::format_tag::ncdhw;
  }
}

memory::format_tag WeightsTag(size_t ndims, bool grouped) {
  if (grouped) {
    switch (ndims) {
      case 3:
        return memory::format_tag::goiw;
      case 4:
        return memory::format_tag::goihw;
      default:
        return memory::format_tag::goidhw;
    }
  }
  return PlainTag(ndims) == memory::format_tag::ncw    ? memory::format_tag::oiw
         : PlainTag(ndims) == memory::format_tag::nchw ? memory::format_tag::oihw
                                                       : memory::format_tag::oidhw;
}

memory::dims Minus1(const std::vector<int64_t>& v) {
  memory::dims out(v.begin(), v.end());
  for (auto& x : out) x -= 1;
  return out;
}

// A user tensor and, when the primitive wants another layout, the reorder into (or out of) it.
struct Layout {
  memory::desc user;
  memory::desc prim;
  bool reorder = false;
  dnnl::reorder::primitive_desc pd;
  dnnl::reorder prim_reorder;

  void Make(const memory::desc& user_md, const memory::desc& prim_md, bool to_prim) {
    user = user_md;
    prim = prim_md;
    reorder = user_md != prim_md;
    if (!reorder) return;
    const dnnl::primitive_attr attr = onednn::UserScratchpadAttr();
    pd = to_prim ? dnnl::reorder::primitive_desc(onednn::Engine(), user_md, onednn::Engine(), prim_md, attr)
                 : dnnl::reorder::primitive_desc(onednn::Engine(), prim_md, onednn::Engine(), user_md, attr);
    prim_reorder = dnnl::reorder(pd);
  }

  // The memory the primitive reads: the user's data, or a reordered copy in thread buffer `slot`.
  StatusOr<memory> In(const void* data, int slot) const {
    memory user_mem = onednn::Wrap(user, data);
    if (!reorder) return user_mem;
    memory m(prim, onednn::Engine(), onednn::ThreadBuffer(slot, prim.get_size()));
    ONNXAMP_RETURN_IF_ERROR(
        onednn::Execute(prim_reorder, pd, {{DNNL_ARG_FROM, user_mem}, {DNNL_ARG_TO, m}}, "reorder"));
    return m;
  }
};

struct ConvEntry {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward prim;
  Layout x, w, y;
  memory::desc b_md;
};

// Row-major strides of [n, c, spatial...] with the batch stride replaced (a channel slice of a larger tensor).
memory::dims SliceStrides(const memory::dims& dims, int64_t batch_stride) {
  memory::dims strides(dims.size(), 1);
  for (size_t i = dims.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * dims[i + 1];
  strides[0] = batch_stride;
  return strides;
}

StatusOr<ConvEntry> MakeConv(const ConvProblem& p, bool bf16, bool has_bias, int64_t x_batch_stride,
                             int64_t y_batch_stride) {
  const WindowGeometry& g = p.geo;
  const size_t nd = g.rank() + 2;
  memory::dims xd = {p.n, p.c}, yd = {p.n, p.m};
  memory::dims wd = p.group > 1 ? memory::dims{p.group, p.m / p.group, p.c / p.group} : memory::dims{p.m, p.c};
  xd.insert(xd.end(), g.in.begin(), g.in.end());
  yd.insert(yd.end(), g.out.begin(), g.out.end());
  wd.insert(wd.end(), g.kernel.begin(), g.kernel.end());
  const auto f32 = memory::data_type::f32;
  const auto in_type = bf16 ? memory::data_type::bf16 : f32;
  ConvEntry e;
  try {
    const memory::desc x_user(xd, in_type, SliceStrides(xd, x_batch_stride));
    const memory::desc y_user(yd, f32, SliceStrides(yd, y_batch_stride));
    const memory::desc w_user(wd, in_type, WeightsTag(nd, p.group > 1));
    const memory::desc x_any(xd, in_type, memory::format_tag::any), y_any(yd, f32, memory::format_tag::any);
    const memory::desc w_any(wd, in_type, memory::format_tag::any);
    e.b_md = has_bias ? memory::desc({p.m}, f32, memory::format_tag::x) : memory::desc();
    const memory::dims strides(g.stride.begin(), g.stride.end());
    const memory::dims pad_l(g.pad_begin.begin(), g.pad_begin.end()), pad_r(g.pad_end.begin(), g.pad_end.end());
    // A first layer (an image with a few channels) runs best from the plain input: no reorder of the input, and
    // oneDNN has kernels for exactly that case. Everything else prefers blocked channels.
    const bool few_channels = p.group == 1 && p.c < 4;
    const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                            few_channels ? x_user : x_any, w_any, e.b_md, y_any, strides,
                                            Minus1(g.dilation), pad_l, pad_r);
    e.pd = dnnl::convolution_forward::primitive_desc(d, onednn::UserScratchpadAttr(), onednn::Engine());
    e.prim = dnnl::convolution_forward(e.pd);
    e.x.Make(x_user, e.pd.src_desc(), true);
    e.w.Make(w_user, e.pd.weights_desc(), true);
    e.y.Make(y_user, e.pd.dst_desc(), false);
  } catch (const dnnl::error& err) {
    return onednn::ErrorStatus("convolution", err);
  }
  return e;
}

struct PoolEntry {
  dnnl::pooling_v2_forward::primitive_desc pd;
  dnnl::pooling_v2_forward prim;
  memory::desc x_md, y_md;
};

StatusOr<PoolEntry> MakePool(PoolKind kind, int64_t n, int64_t c, const WindowGeometry& g) {
  const size_t nd = g.rank() + 2;
  memory::dims xd = {n, c}, yd = {n, c};
  xd.insert(xd.end(), g.in.begin(), g.in.end());
  yd.insert(yd.end(), g.out.begin(), g.out.end());
  // oneDNN derives the output size with floor; a ceil-mode window past the end padding needs more end padding.
  memory::dims pad_r(g.rank());
  for (size_t i = 0; i < g.rank(); ++i) {
    const int64_t k_eff = (g.kernel[i] - 1) * g.dilation[i] + 1;
    pad_r[i] = std::max(g.pad_end[i], (g.out[i] - 1) * g.stride[i] + k_eff - g.in[i] - g.pad_begin[i]);
  }
  const dnnl::algorithm alg = kind == PoolKind::kMax                 ? dnnl::algorithm::pooling_max
                              : kind == PoolKind::kAverageIncludePad ? dnnl::algorithm::pooling_avg_include_padding
                                                                     : dnnl::algorithm::pooling_avg_exclude_padding;
  PoolEntry e;
  try {
    e.x_md = memory::desc(xd, memory::data_type::f32, PlainTag(nd));
    e.y_md = memory::desc(yd, memory::data_type::f32, PlainTag(nd));
    const dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, e.x_md, e.y_md,
                                           memory::dims(g.stride.begin(), g.stride.end()),
                                           memory::dims(g.kernel.begin(), g.kernel.end()), Minus1(g.dilation),
                                           memory::dims(g.pad_begin.begin(), g.pad_begin.end()), pad_r);
    e.pd = dnnl::pooling_v2_forward::primitive_desc(d, onednn::UserScratchpadAttr(), onednn::Engine());
    e.prim = dnnl::pooling_v2_forward(e.pd);
  } catch (const dnnl::error& err) {
    return onednn::ErrorStatus("pooling", err);
  }
  return e;
}

std::vector<int64_t> GeometryKey(const WindowGeometry& g) {
  std::vector<int64_t> key;
  for (const auto* v : {&g.in, &g.kernel, &g.stride, &g.dilation, &g.pad_begin, &g.pad_end, &g.out}) {
    key.insert(key.end(), v->begin(), v->end());
  }
  return key;
}

}  // namespace

struct OneDnnConv::Cache {
  onednn::Cache<ConvEntry> entries;
};
struct OneDnnPool::Cache {
  onednn::Cache<PoolEntry> entries;
};

OneDnnConv::OneDnnConv() : cache_(std::make_unique<Cache>()) {}
OneDnnPool::OneDnnPool() : cache_(std::make_unique<Cache>()) {}

bool OneDnnConv::Supported(const ConvProblem& p) {
  if (p.geo.rank() < 1 || p.geo.rank() > 3) return false;
  for (size_t i = 0; i < p.geo.rank(); ++i) {
    if (p.geo.pad_begin[i] < 0 || p.geo.pad_end[i] < 0) return false;
  }
  return true;
}

bool OneDnnPool::Supported(const WindowGeometry& geo) {
  if (geo.rank() < 1 || geo.rank() > 3) return false;
  for (size_t i = 0; i < geo.rank(); ++i) {
    if (geo.pad_begin[i] < 0 || geo.pad_end[i] < 0) return false;
  }
  return true;
}

bool OneDnnConv::SupportsBf16() { return onednn::Bf16Supported(); }

Status OneDnnConv::Run(const ConvProblem& p, const void* x, const void* w, bool bf16, const float* bias, float* y,
                       exec::ThreadPool& threads) const {
  const int64_t in_bytes = bf16 ? 2 : 4;
  const WindowGeometry& g = p.geo;
  const int64_t in_size = g.in_size(), out_size = g.out_size(), k_size = g.kernel_size();
  const int64_t cg = p.c / p.group, mg = p.m / p.group;
  // One part per image block when there are enough images; else per output-channel block (group 1) or per
  // block of groups, each part then a convolution over strided channel slices of x and y.
  struct Part {
    ConvProblem p;
    int64_t x_offset, w_offset, b_offset, y_offset;
  };
  std::vector<Part> parts;
  const int64_t want = onednn::PartsFor(2.0 * p.n * p.m * out_size * cg * k_size, threads);
  auto chunks = [&](int64_t total, int64_t align) {
    const int64_t size = ((total + want - 1) / want + align - 1) / align * align;
    std::vector<std::pair<int64_t, int64_t>> c;
    for (int64_t begin = 0; begin < total; begin += size) c.emplace_back(begin, std::min(size, total - begin));
    return c;
  };
  if (want <= 1) {
    parts.push_back({p, 0, 0, 0, 0});
  } else if (p.n >= want) {
    for (const auto& [n0, nn] : chunks(p.n, 1)) {
      Part part{p, n0 * p.c * in_size, 0, 0, n0 * p.m * out_size};
      part.p.n = nn;
      parts.push_back(part);
    }
  } else if (p.group == 1) {
    for (const auto& [m0, mm] : chunks(p.m, 8)) {
      Part part{p, 0, m0 * p.c * k_size, m0, m0 * out_size};
      part.p.m = mm;
      parts.push_back(part);
    }
  } else {
    for (const auto& [g0, gg] : chunks(p.group, 1)) {
      Part part{p, g0 * cg * in_size, g0 * mg * cg * k_size, g0 * mg, g0 * mg * out_size};
      part.p.group = gg;
      part.p.c = gg * cg;
      part.p.m = gg * mg;
      parts.push_back(part);
    }
  }
  const int64_t x_batch_stride = p.c * in_size, y_batch_stride = p.m * out_size;
  return onednn::ParallelParts(threads, static_cast<int64_t>(parts.size()), [&](int64_t i) -> Status {
    const Part& part = parts[static_cast<size_t>(i)];
    const ConvProblem& q = part.p;
    std::vector<int64_t> key = GeometryKey(q.geo);
    key.insert(key.end(), {q.n, q.c, q.m, q.group, bf16, bias != nullptr, x_batch_stride, y_batch_stride});
    ONNXAMP_ASSIGN_OR_RETURN(auto e, cache_->entries.Get(key, [&] {
      return MakeConv(q, bf16, bias != nullptr, x_batch_stride, y_batch_stride);
    }));
    const auto* px = static_cast<const std::byte*>(x) + part.x_offset * in_bytes;
    const auto* pw = static_cast<const std::byte*>(w) + part.w_offset * in_bytes;
    float* py = y + part.y_offset;
    try {
      ONNXAMP_ASSIGN_OR_RETURN(memory xm, e->x.In(px, 1));
      ONNXAMP_ASSIGN_OR_RETURN(memory wm, e->w.In(pw, 2));
      memory ym = e->y.reorder ? memory(e->y.prim, onednn::Engine(), onednn::ThreadBuffer(3, e->y.prim.get_size()))
                               : onednn::Wrap(e->y.user, py);
      std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, ym}};
      if (bias) args.emplace(DNNL_ARG_BIAS, onednn::Wrap(e->b_md, bias + part.b_offset));
      ONNXAMP_RETURN_IF_ERROR(onednn::Execute(e->prim, e->pd, std::move(args), "convolution"));
      if (e->y.reorder) {
        ONNXAMP_RETURN_IF_ERROR(onednn::Execute(
            e->y.prim_reorder, e->y.pd, {{DNNL_ARG_FROM, ym}, {DNNL_ARG_TO, onednn::Wrap(e->y.user, py)}}, "reorder"));
      }
    } catch (const dnnl::error& err) {
      return onednn::ErrorStatus("convolution", err);
    }
    return Status::Ok();
  });
}

Status OneDnnPool::Run(PoolKind kind, int64_t n, int64_t c, const WindowGeometry& geo, const float* x, float* y,
                       exec::ThreadPool& threads) const {
  // Every (image, channel) plane pools on its own: the planes are cut into blocks, each pooled as [1, planes].
  const int64_t in_size = geo.in_size(), out_size = geo.out_size(), k_size = geo.kernel_size();
  const int64_t planes = n * c;
  if (planes == 0) return Status::Ok();
  const int64_t want = std::min(planes, onednn::PartsFor(4.0 * planes * out_size * k_size, threads));
  const int64_t size = (planes + want - 1) / want;
  return onednn::ParallelParts(threads, (planes + size - 1) / size, [&](int64_t i) -> Status {
    const int64_t p0 = i * size, count = std::min(size, planes - p0);
    std::vector<int64_t> key = GeometryKey(geo);
    key.insert(key.end(), {count, static_cast<int64_t>(kind)});
    ONNXAMP_ASSIGN_OR_RETURN(auto e, cache_->entries.Get(key, [&] { return MakePool(kind, 1, count, geo); }));
    try {
      return onednn::Execute(e->prim, e->pd,
                             {{DNNL_ARG_SRC, onednn::Wrap(e->x_md, x + p0 * in_size)},
                              {DNNL_ARG_DST, onednn::Wrap(e->y_md, y + p0 * out_size)}},
                             "pooling");
    } catch (const dnnl::error& err) {
      return onednn::ErrorStatus("pooling", err);
    }
  });
}

#else  // !ONNXAMP_WITH_DNNL

struct OneDnnConv::Cache {};
struct OneDnnPool::Cache {};
OneDnnConv::OneDnnConv() = default;
OneDnnPool::OneDnnPool() = default;
bool OneDnnConv::Supported(const ConvProblem&) { return false; }
bool OneDnnConv::SupportsBf16() { return false; }
bool OneDnnPool::Supported(const WindowGeometry&) { return false; }
Status OneDnnConv::Run(const ConvProblem&, const void*, const void*, bool, const float*, float*,
                       exec::ThreadPool&) const {
  return Internal("oneDNN is not part of this build");
}
Status OneDnnPool::Run(PoolKind, int64_t, int64_t, const WindowGeometry&, const float*, float*,
                       exec::ThreadPool&) const {
  return Internal("oneDNN is not part of this build");
}

#endif  // ONNXAMP_WITH_DNNL

OneDnnConv::~OneDnnConv() = default;
OneDnnPool::~OneDnnPool() = default;

}  // namespace onnxamp::ops
