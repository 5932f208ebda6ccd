// oneDNN convolution and pooling on plain NC<spatial> float tensors (see conv_onednn.h).
//
// The convolution lets oneDNN choose its preferred layouts (blocked channels on AVX-512 machines) and reorders the
// user's plain tensors into them and back when they differ; the reorders are cached with the primitive, and constant
// weights are reordered once and kept. The memory objects and argument lists of every execution are made once per
// cached primitive (one set per thread using it at the same time); a run only points them at its data and builds no
// memory objects or argument maps. A fused residual sum runs inside the primitive as a post-op; its operand is
// first reordered (or copied) into the destination buffer, as oneDNN's sum post-op reads it from there. A fused ReLU
// runs on each part's result right after the primitive (still in cache), not as oneDNN's post-op, whose vector
// kernels compute max(x, 0) and so turn NaN into 0 where the Relu op keeps it. Work is split over the session's threads
// (see onednn.h): convolutions by image blocks, or by output-channel or group blocks when there are fewer images than
// threads; pooling by blocks of (image, channel) planes.
#include "runtime/ops/common/conv_onednn.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/ir/tensor.h"
#include "runtime/ops/common/elementwise_math.h"
#include "runtime/ops/common/onednn.h"

namespace onnxamp::ops {

#ifdef ONNXAMP_WITH_DNNL
namespace {

using dnnl::memory;
using onednn::PlainTag;
using onednn::WeightsTag;

// The blocked layout [N, C / block, spatial..., block] (block 8 or 16).
memory::format_tag BlockedTag(size_t ndims, int64_t block) {
  const bool b16 = block == 16;
  switch (ndims) {
    case 3:
      return b16 ? memory::format_tag::nCw16c : memory::format_tag::nCw8c;
    case 4:
      return b16 ? memory::format_tag::nChw16c : memory::format_tag::nChw8c;
    default:
      return b16 ? memory::format_tag::nCdhw16c : memory::format_tag::nCdhw8c;
  }
}

memory::dims Minus1(const std::vector<int64_t>& v) {
  memory::dims out(v.begin(), v.end());
  for (auto& x : out) x -= 1;
  return out;
}

using Layout = onednn::Relayout;

// A memory object without data; Point gives it its data before every execution.
memory Unbound(const memory::desc& md) { return memory(md, onednn::Engine(), DNNL_MEMORY_NONE); }

void Point(const memory& m, const void* data) { m.set_data_handle(const_cast<void*>(data), onednn::Stream()); }

// One execution of a primitive whose arguments are memory objects made once: a run only points them at its data.
// Through the C API, so that an execution builds no argument map.
class BoundExec {
 public:
  void Bind(const dnnl::primitive& prim, const dnnl::primitive_desc_base& pd,
            std::initializer_list<std::pair<int, const memory*>> args) {
    prim_ = prim.get();
    for (const auto& [arg, m] : args) args_.push_back({arg, m->get()});
    scratch_bytes_ = pd.scratchpad_desc().get_size();
    if (scratch_bytes_ > 0) {
      scratch_ = Unbound(pd.scratchpad_desc());
      args_.push_back({DNNL_ARG_SCRATCHPAD, scratch_.get()});
    }
  }

  Status Run(const char* what) const {
    if (scratch_bytes_ > 0) Point(scratch_, onednn::ThreadBuffer(0, scratch_bytes_));
    dnnl::stream& stream = onednn::Stream();
    dnnl_status_t st = dnnl_primitive_execute(prim_, stream.get(), static_cast<int>(args_.size()), args_.data());
    if (st == dnnl_success) st = dnnl_stream_wait(stream.get());
    if (st != dnnl_success) return Internal(what, ": oneDNN: execution failed (status ", static_cast<int>(st), ")");
    return Status::Ok();
  }

 private:
  dnnl_primitive_t prim_ = nullptr;
  std::vector<dnnl_exec_arg_t> args_;
  memory scratch_;
  size_t scratch_bytes_ = 0;
};

// Bound memory objects of one cached primitive, lent to one caller at a time: several threads may run the same
// primitive at once (parts of equal shape), each with its own set.
template <typename B>
class BoundPool {
 public:
  std::unique_ptr<B> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty()) return nullptr;
    std::unique_ptr<B> b = std::move(free_.back());
    free_.pop_back();
    return b;
  }
  void Give(std::unique_ptr<B> b) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(b));
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<B>> free_;
};

// Takes a bound set from `pool` (making one with `make` when none is free) and gives it back on destruction.
template <typename B>
class BoundLease {
 public:
  BoundLease(BoundPool<B>& pool, std::unique_ptr<B> b) : pool_(pool), b_(std::move(b)) {}
  ~BoundLease() {
    if (b_) pool_.Give(std::move(b_));
  }
  BoundLease(const BoundLease&) = delete;
  BoundLease& operator=(const BoundLease&) = delete;
  B* operator->() const { return b_.get(); }

 private:
  BoundPool<B>& pool_;
  std::unique_ptr<B> b_;
};

struct ConvBound;

struct ConvEntry {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward prim;
  Layout x, w, y;
  Layout sum;  // the sum post-op's operand: user layout (that of y) -> the primitive's dst layout
  memory::desc b_md;
  std::unique_ptr<BoundPool<ConvBound>> bound = std::make_unique<BoundPool<ConvBound>>();
};

// The memory objects and executions of one ConvEntry: x, w and y in the user's layout and, where the primitive
// wants another, in the primitive's (reordered copies in thread buffers; constant weights packed once).
struct ConvBound {
  memory x_user, x_prim, w_user, w_prim, y_user, y_prim, sum_user, b;
  BoundExec x_reorder, w_reorder, y_reorder, sum_reorder, conv;
  const void* packed_source = nullptr;  // the constant weights w_prim points at (packed), or null
  std::shared_ptr<const std::shared_ptr<ir::Buffer>> packed;

  explicit ConvBound(const ConvEntry& e) {
    x_user = Unbound(e.x.user);
    w_user = Unbound(e.w.user);
    y_user = Unbound(e.y.user);
    const memory& xm = e.x.reorder ? (x_prim = Unbound(e.x.prim)) : x_user;
    const memory& wm = e.w.reorder ? (w_prim = Unbound(e.w.prim)) : w_user;
    const memory& ym = e.y.reorder ? (y_prim = Unbound(e.y.prim)) : y_user;
    if (e.x.reorder) x_reorder.Bind(e.x.prim_reorder, e.x.pd, {{DNNL_ARG_FROM, &x_user}, {DNNL_ARG_TO, &x_prim}});
    if (e.w.reorder) w_reorder.Bind(e.w.prim_reorder, e.w.pd, {{DNNL_ARG_FROM, &w_user}, {DNNL_ARG_TO, &w_prim}});
    if (e.y.reorder) y_reorder.Bind(e.y.prim_reorder, e.y.pd, {{DNNL_ARG_FROM, &y_prim}, {DNNL_ARG_TO, &y_user}});
    if (e.sum.reorder) {
      sum_user = Unbound(e.sum.user);
      sum_reorder.Bind(e.sum.prim_reorder, e.sum.pd, {{DNNL_ARG_FROM, &sum_user}, {DNNL_ARG_TO, &ym}});
    }
    if (e.b_md.get_size() > 0) {
      b = Unbound(e.b_md);
      conv.Bind(e.prim, e.pd, {{DNNL_ARG_SRC, &xm}, {DNNL_ARG_WEIGHTS, &wm}, {DNNL_ARG_BIAS, &b}, {DNNL_ARG_DST, &ym}});
    } else {
      conv.Bind(e.prim, e.pd, {{DNNL_ARG_SRC, &xm}, {DNNL_ARG_WEIGHTS, &wm}, {DNNL_ARG_DST, &ym}});
    }
  }
};

// Row-major strides of [n, c, spatial...] with the batch stride replaced (a channel slice of a larger tensor).
memory::dims SliceStrides(const memory::dims& dims, int64_t batch_stride) {
  memory::dims strides(dims.size(), 1);
  for (size_t i = dims.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * dims[i + 1];
  strides[0] = batch_stride;
  return strides;
}

StatusOr<ConvEntry> MakeConv(const ConvProblem& p, bool bf16, bool has_bias, bool has_sum, int64_t x_batch_stride,
                             int64_t y_batch_stride, const ConvLayouts& layouts) {
  const WindowGeometry& g = p.geo;
  const size_t nd = g.rank() + 2;
  const onednn::ConvDims dims = onednn::ConvDimsOf(p);
  const memory::dims &xd = dims.x, &wd = dims.w, &yd = dims.y;
  const auto f32 = memory::data_type::f32;
  const auto in_type = bf16 ? memory::data_type::bf16 : f32;
  ConvEntry e;
  try {
    // A user tensor: blocked (dense), or plain with the given batch stride.
    auto user_md = [&](const memory::dims& dims, memory::data_type type, int64_t block, int64_t batch_stride) {
      return block != 0 ? memory::desc(dims, type, BlockedTag(nd, block))
                        : memory::desc(dims, type, SliceStrides(dims, batch_stride));
    };
    const memory::desc x_user = user_md(xd, in_type, layouts.x, x_batch_stride);
    const memory::desc y_user = user_md(yd, f32, layouts.y, y_batch_stride);
    const memory::desc z_user = user_md(yd, f32, layouts.z, y_batch_stride);
    const memory::desc w_user(wd, in_type, WeightsTag(nd, p.group > 1));
    const memory::desc x_any(xd, in_type, memory::format_tag::any), y_any(yd, f32, memory::format_tag::any);
    const memory::desc w_any(wd, in_type, memory::format_tag::any);
    e.b_md = has_bias ? memory::desc({p.m}, f32, memory::format_tag::x) : memory::desc();
    const memory::dims strides(g.stride.begin(), g.stride.end());
    const memory::dims pad_l(g.pad_begin.begin(), g.pad_begin.end()), pad_r(g.pad_end.begin(), g.pad_end.end());
    // A first layer (an image with a few channels) runs best from the plain input: no reorder of the input, and
    // oneDNN has kernels for exactly that case. Everything else prefers blocked channels.
    const bool few_channels = p.group == 1 && p.c < 4;
    dnnl::primitive_attr attr = onednn::UserScratchpadAttr();
    if (has_sum) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    auto make = [&](const memory::desc& x_md, const memory::desc& y_md) {
      const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                              x_md, w_any, e.b_md, y_md, strides, Minus1(g.dilation), pad_l, pad_r);
      return dnnl::convolution_forward::primitive_desc(d, attr, onednn::Engine());
    };
    // With a blocked tensor in the problem the primitive runs on the blocked layout (the plain input of a first
    // layer stays plain), unless oneDNN has only its reference code for that; otherwise it picks its layouts.
    const int64_t block = layouts.y != 0 ? layouts.y : layouts.x != 0 ? layouts.x : layouts.z;
    bool chosen = false;
    if (block != 0) {
      const memory::desc x_blocked =
          few_channels && layouts.x == 0 ? x_user : memory::desc(xd, in_type, BlockedTag(nd, block));
      e.pd = make(x_blocked, memory::desc(yd, f32, BlockedTag(nd, block)));
      chosen = std::string_view(e.pd.impl_info_str()).substr(0, 3) != "ref";
    }
    if (!chosen) e.pd = make(few_channels ? x_user : x_any, y_any);
    e.prim = dnnl::convolution_forward(e.pd);
    e.x.Make(x_user, e.pd.src_desc(), true);
    e.w.Make(w_user, e.pd.weights_desc(), true);
    e.y.Make(y_user, e.pd.dst_desc(), false);
    if (has_sum) e.sum.Make(z_user, e.pd.dst_desc(), true);
  } catch (const dnnl::error& err) {
    return onednn::ErrorStatus("convolution", err);
  }
  return e;
}

struct PoolBound;

struct PoolEntry {
  dnnl::pooling_v2_forward::primitive_desc pd;
  dnnl::pooling_v2_forward prim;
  memory::desc x_md, y_md;
  std::unique_ptr<BoundPool<PoolBound>> bound = std::make_unique<BoundPool<PoolBound>>();
};

struct PoolBound {
  memory x, y;
  BoundExec pool;

  explicit PoolBound(const PoolEntry& e) : x(Unbound(e.x_md)), y(Unbound(e.y_md)) {
    pool.Bind(e.prim, e.pd, {{DNNL_ARG_SRC, &x}, {DNNL_ARG_DST, &y}});
  }
};

StatusOr<PoolEntry> MakePool(PoolKind kind, int64_t n, int64_t c, const WindowGeometry& g, int64_t block) {
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
    const memory::format_tag tag = block != 0 ? BlockedTag(nd, block) : PlainTag(nd);
    e.x_md = memory::desc(xd, memory::data_type::f32, tag);
    e.y_md = memory::desc(yd, memory::data_type::f32, tag);
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

// Appends the geometry to a cache key.
void AppendGeometryKey(const WindowGeometry& g, std::vector<int64_t>& key) {
  for (const auto* v : {&g.in, &g.kernel, &g.stride, &g.dilation, &g.pad_begin, &g.pad_end, &g.out}) {
    key.insert(key.end(), v->begin(), v->end());
  }
}

}  // namespace

namespace onednn {

dnnl::memory::format_tag PlainTag(size_t ndims) {
  switch (ndims) {
    case 3:
      return dnnl::memory::format_tag::ncw;
    case 4:
      return dnnl::memory::format_tag::nchw;
    default:
      return dnnl::memory::format_tag::ncdhw;
  }
}

dnnl::memory::format_tag WeightsTag(size_t ndims, bool grouped) {
  if (grouped) {
    switch (ndims) {
      case 3:
        return dnnl::memory::format_tag::goiw;
      case 4:
        return dnnl::memory::format_tag::goihw;
      default:
        return dnnl::memory::format_tag::goidhw;
    }
  }
  return PlainTag(ndims) == dnnl::memory::format_tag::ncw    ? dnnl::memory::format_tag::oiw
         : PlainTag(ndims) == dnnl::memory::format_tag::nchw ? dnnl::memory::format_tag::oihw
                                                             : dnnl::memory::format_tag::oidhw;
}

ConvDims ConvDimsOf(const ConvProblem& p) {
  const WindowGeometry& g = p.geo;
  ConvDims d;
  d.x = {p.n, p.c};
  d.y = {p.n, p.m};
  d.w = p.group > 1 ? dnnl::memory::dims{p.group, p.m / p.group, p.c / p.group} : dnnl::memory::dims{p.m, p.c};
  d.x.insert(d.x.end(), g.in.begin(), g.in.end());
  d.y.insert(d.y.end(), g.out.begin(), g.out.end());
  d.w.insert(d.w.end(), g.kernel.begin(), g.kernel.end());
  return d;
}

}  // namespace onednn

struct OneDnnConv::Cache {
  onednn::Cache<ConvEntry> entries;
  // Constant weights in the primitive's layout, keyed like `entries` plus the weights' address.
  onednn::Cache<std::shared_ptr<ir::Buffer>> packed_weights;
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
                       exec::ThreadPool& threads, const ConvPostOps& post, bool constant_w,
                       const ConvLayouts& layouts) const {
  const int64_t in_bytes = bf16 ? 2 : 4;
  const WindowGeometry& g = p.geo;
  const int64_t in_size = g.in_size(), out_size = g.out_size(), k_size = g.kernel_size();
  const int64_t cg = p.c / p.group, mg = p.m / p.group;
  // One part per image block when there are enough images; else per output-channel block (group 1) or per
  // block of groups, each part then a convolution over strided channel slices of x and y.
  struct Part {
    int64_t n, c, m, group;
    int64_t x_offset, w_offset, b_offset, y_offset;
  };
  const int64_t want = onednn::PartsFor(2.0 * p.n * p.m * out_size * cg * k_size, threads);
  Part single{p.n, p.c, p.m, p.group, 0, 0, 0, 0};
  std::vector<Part> parts;  // more than one part only
  auto chunks = [&](int64_t total, int64_t align, auto&& add) {
    const int64_t size = ((total + want - 1) / want + align - 1) / align * align;
    for (int64_t begin = 0; begin < total; begin += size) add(begin, std::min(size, total - begin));
  };
  // Elements of one image of x and of y (and z) in their layouts.
  const int64_t x_image = ImageElements(p.c, in_size, layouts.x), y_image = ImageElements(p.m, out_size, layouts.y);
  const int64_t z_image = ImageElements(p.m, out_size, layouts.z);
  if (want <= 1) {
    // `single` as it is
  } else if (p.n >= want) {
    chunks(p.n, 1, [&](int64_t n0, int64_t nn) {
      parts.push_back({nn, p.c, p.m, p.group, n0 * x_image, 0, 0, n0 * y_image});
    });
  } else if (layouts.any_blocked()) {
    // blocked tensors are split by images only: `single` as it is
  } else if (p.group == 1) {
    chunks(p.m, 8, [&](int64_t m0, int64_t mm) {
      parts.push_back({p.n, p.c, mm, 1, 0, m0 * p.c * k_size, m0, m0 * out_size});
    });
  } else {
    chunks(p.group, 1, [&](int64_t g0, int64_t gg) {
      parts.push_back(
          {p.n, gg * cg, gg * mg, gg, g0 * cg * in_size, g0 * mg * cg * k_size, g0 * mg, g0 * mg * out_size});
    });
  }
  const int64_t x_batch_stride = x_image, y_batch_stride = y_image;
  const bool has_sum = post.sum != nullptr;
  const int64_t num_parts = parts.empty() ? 1 : static_cast<int64_t>(parts.size());
  return onednn::ParallelParts(threads, num_parts, [&](int64_t i) -> Status {
    const Part& part = parts.empty() ? single : parts[static_cast<size_t>(i)];
    // The key lives on the calling thread and keeps its capacity: finding a cached primitive allocates nothing.
    thread_local std::vector<int64_t> key;
    key.clear();
    AppendGeometryKey(g, key);
    key.insert(key.end(), {part.n, part.c, part.m, part.group, bf16, bias != nullptr, has_sum, x_batch_stride,
                           y_batch_stride, layouts.x, layouts.z, layouts.y});
    ONNXAMP_ASSIGN_OR_RETURN(auto e, cache_->entries.Get(key, [&] {
      ConvProblem q{part.n, part.c, part.m, part.group, g};
      return MakeConv(q, bf16, bias != nullptr, has_sum, x_batch_stride, y_batch_stride, layouts);
    }));
    const auto* px = static_cast<const std::byte*>(x) + part.x_offset * in_bytes;
    const auto* pw = static_cast<const std::byte*>(w) + part.w_offset * in_bytes;
    float* py = y + part.y_offset;
    try {
      std::unique_ptr<ConvBound> taken = e->bound->Take();
      if (!taken) taken = std::make_unique<ConvBound>(*e);
      BoundLease<ConvBound> b(*e->bound, std::move(taken));
      Point(b->x_user, px);
      if (e->x.reorder) {
        Point(b->x_prim, onednn::ThreadBuffer(1, e->x.prim.get_size()));
        ONNXAMP_RETURN_IF_ERROR(b->x_reorder.Run("reorder"));
      }
      if (!e->w.reorder) {
        Point(b->w_user, pw);
      } else if (constant_w) {
        if (b->packed_source != pw) {
          std::vector<int64_t> wkey = key;
          wkey.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(pw)));
          ONNXAMP_ASSIGN_OR_RETURN(
              b->packed, cache_->packed_weights.Get(wkey, [&]() -> StatusOr<std::shared_ptr<ir::Buffer>> {
                auto buffer = std::make_shared<ir::Buffer>(e->w.prim.get_size(), ir::Buffer::Init::kUninitialized);
                ONNXAMP_RETURN_IF_ERROR(onednn::Execute(e->w.prim_reorder, e->w.pd,
                                                        {{DNNL_ARG_FROM, onednn::Wrap(e->w.user, pw)},
                                                         {DNNL_ARG_TO, onednn::Wrap(e->w.prim, buffer->data())}},
                                                        "reorder"));
                return buffer;
              }));
          Point(b->w_prim, (*b->packed)->data());
          b->packed_source = pw;
        }
      } else {
        b->packed_source = nullptr;
        Point(b->w_user, pw);
        Point(b->w_prim, onednn::ThreadBuffer(2, e->w.prim.get_size()));
        ONNXAMP_RETURN_IF_ERROR(b->w_reorder.Run("reorder"));
      }
      Point(b->y_user, py);
      if (e->y.reorder) Point(b->y_prim, onednn::ThreadBuffer(3, e->y.prim.get_size()));
      if (has_sum) {
        // oneDNN's sum post-op adds what the destination holds: put the operand there first.
        // Image splits only when z's layout differs from y's.
        const float* pz = post.sum + (layouts.z == layouts.y ? part.y_offset : part.y_offset / y_image * z_image);
        if (e->sum.reorder) {
          Point(b->sum_user, pz);
          ONNXAMP_RETURN_IF_ERROR(b->sum_reorder.Run("reorder"));
        } else if (e->y.reorder) {
          // z already in the primitive's (blocked) layout, y not: z goes to the primitive's destination buffer.
          std::memcpy(b->y_prim.get_data_handle(), pz, static_cast<size_t>(part.n * z_image) * sizeof(float));
        } else if (layouts.y != 0) {
          std::memcpy(py, pz, static_cast<size_t>(part.n * y_image) * sizeof(float));
        } else {
          const size_t image = static_cast<size_t>(part.m * out_size);
          for (int64_t n = 0; n < part.n; ++n) {
            std::memcpy(py + n * y_batch_stride, pz + n * y_batch_stride, image * sizeof(float));
          }
        }
      }
      if (bias) Point(b->b, bias + part.b_offset);
      ONNXAMP_RETURN_IF_ERROR(b->conv.Run("convolution"));
      if (post.relu) {
        if (e->y.reorder) {
          // The primitive's destination, blocked padding lanes included (zeros, which stay).
          float* dst = static_cast<float*>(b->y_prim.get_data_handle());
          ReluArray(dst, dst, static_cast<int64_t>(e->y.prim.get_size() / sizeof(float)));
        } else if (layouts.y != 0) {
          ReluArray(py, py, part.n * y_image);  // whole blocked images
        } else {
          for (int64_t n = 0; n < part.n; ++n)
            ReluArray(py + n * y_batch_stride, py + n * y_batch_stride, part.m * out_size);
        }
      }
      if (e->y.reorder) ONNXAMP_RETURN_IF_ERROR(b->y_reorder.Run("reorder"));
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
    thread_local std::vector<int64_t> key;
    key.clear();
    AppendGeometryKey(geo, key);
    key.insert(key.end(), {count, static_cast<int64_t>(kind)});
    ONNXAMP_ASSIGN_OR_RETURN(auto e, cache_->entries.Get(key, [&] { return MakePool(kind, 1, count, geo, 0); }));
    try {
      std::unique_ptr<PoolBound> taken = e->bound->Take();
      if (!taken) taken = std::make_unique<PoolBound>(*e);
      BoundLease<PoolBound> b(*e->bound, std::move(taken));
      Point(b->x, x + p0 * in_size);
      Point(b->y, y + p0 * out_size);
      return b->pool.Run("pooling");
    } catch (const dnnl::error& err) {
      return onednn::ErrorStatus("pooling", err);
    }
  });
}

Status OneDnnPool::RunBlocked(PoolKind kind, int64_t n, int64_t c, int64_t block, const WindowGeometry& geo,
                              const float* x, float* y, exec::ThreadPool& threads) const {
  // Split by images (blocks of channels stay whole).
  const int64_t in_image = c * geo.in_size(), out_image = c * geo.out_size();
  if (n == 0 || c == 0) return Status::Ok();
  const int64_t want = std::min(n, onednn::PartsFor(4.0 * n * out_image * geo.kernel_size(), threads));
  const int64_t size = (n + want - 1) / want;
  return onednn::ParallelParts(threads, (n + size - 1) / size, [&](int64_t i) -> Status {
    const int64_t n0 = i * size, count = std::min(size, n - n0);
    thread_local std::vector<int64_t> key;
    key.clear();
    AppendGeometryKey(geo, key);
    key.insert(key.end(), {count, c, block, static_cast<int64_t>(kind)});
    ONNXAMP_ASSIGN_OR_RETURN(auto e, cache_->entries.Get(key, [&] { return MakePool(kind, count, c, geo, block); }));
    try {
      std::unique_ptr<PoolBound> taken = e->bound->Take();
      if (!taken) taken = std::make_unique<PoolBound>(*e);
      BoundLease<PoolBound> b(*e->bound, std::move(taken));
      Point(b->x, x + n0 * in_image);
      Point(b->y, y + n0 * out_image);
      return b->pool.Run("pooling");
    } catch (const dnnl::error& err) {
      return onednn::ErrorStatus("pooling", err);
    }
  });
}

int64_t PreferredChannelBlock(LinalgImpl impl) {
  if (impl != LinalgImpl::kOneDnn) return 0;
  static const int64_t block = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return 16;
    if (__builtin_cpu_supports("avx2")) return 8;
    return 0;
  }();
  return block;
}

#else  // !ONNXAMP_WITH_DNNL

struct OneDnnConv::Cache {};
struct OneDnnPool::Cache {};
OneDnnConv::OneDnnConv() = default;
OneDnnPool::OneDnnPool() = default;
bool OneDnnConv::Supported(const ConvProblem&) { return false; }
bool OneDnnConv::SupportsBf16() { return false; }
bool OneDnnPool::Supported(const WindowGeometry&) { return false; }
Status OneDnnConv::Run(const ConvProblem&, const void*, const void*, bool, const float*, float*, exec::ThreadPool&,
                       const ConvPostOps&, bool, const ConvLayouts&) const {
  return Internal("oneDNN is not part of this build");
}
Status OneDnnPool::Run(PoolKind, int64_t, int64_t, const WindowGeometry&, const float*, float*,
                       exec::ThreadPool&) const {
  return Internal("oneDNN is not part of this build");
}
Status OneDnnPool::RunBlocked(PoolKind, int64_t, int64_t, int64_t, const WindowGeometry&, const float*, float*,
                              exec::ThreadPool&) const {
  return Internal("oneDNN is not part of this build");
}
int64_t PreferredChannelBlock(LinalgImpl) { return 0; }

#endif  // ONNXAMP_WITH_DNNL

OneDnnConv::~OneDnnConv() = default;
OneDnnPool::~OneDnnPool() = default;

}  // namespace onnxamp::ops
