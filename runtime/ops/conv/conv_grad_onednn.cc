// oneDNN convolution backward (data and weights) for ConvGrad on plain float32 tensors (see conv_grad_onednn.h).
#include "runtime/ops/conv/conv_grad_onednn.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/ops/common/onednn.h"

namespace onnxamp::ops {

std::vector<OneDnnConvGrad::Task> OneDnnConvGrad::Plan(int64_t n, bool data, bool weights, int threads) {
  std::vector<Task> tasks;
  if (n <= 0) return tasks;
  const int64_t blocks = weights ? (n + kImagesPerBlock - 1) / kImagesPerBlock : 0;
  for (int64_t b = 0; b < blocks; ++b) {
    tasks.push_back({Task::kWeights, b * kImagesPerBlock, std::min(kImagesPerBlock, n - b * kImagesPerBlock)});
  }
  if (data) {
    // The data gradient in parts of about a weight block's work, or, while there are fewer weight blocks than
    // threads, in one part per thread left over (each image's gradient is computed alone, whatever part it is in).
    const int64_t free_threads = std::max<int64_t>(0, threads - blocks);
    int64_t parts = free_threads > 0 ? free_threads : (n + kImagesPerBlock - 1) / kImagesPerBlock;
    parts = std::max<int64_t>(1, std::min(parts, n));
    for (int64_t k = 0, n0 = 0; k < parts; ++k) {  // sizes differ by at most one image
      const int64_t count = n / parts + (k < n % parts ? 1 : 0);
      tasks.push_back({Task::kData, n0, count});
      n0 += count;
    }
  }
  return tasks;
}

#ifdef ONNXAMP_WITH_DNNL
namespace {

using dnnl::memory;

using onednn::PlainTag;
using onednn::WeightsTag;
using Moved = onednn::Relayout;

struct Descs {
  memory::desc x_user, y_user, w_user, x_any, y_any, w_any;
  memory::dims strides, dilation, pad_l, pad_r;
};

Descs MakeDescs(const ConvProblem& p) {
  const WindowGeometry& g = p.geo;
  const size_t nd = g.rank() + 2;
  const onednn::ConvDims dims = onednn::ConvDimsOf(p);
  const memory::dims &xd = dims.x, &wd = dims.w, &yd = dims.y;
  const auto f32 = memory::data_type::f32;
  Descs d;
  d.x_user = memory::desc(xd, f32, PlainTag(nd));
  d.y_user = memory::desc(yd, f32, PlainTag(nd));
  d.w_user = memory::desc(wd, f32, WeightsTag(nd, p.group > 1));
  d.x_any = memory::desc(xd, f32, memory::format_tag::any);
  d.y_any = memory::desc(yd, f32, memory::format_tag::any);
  d.w_any = memory::desc(wd, f32, memory::format_tag::any);
  d.strides.assign(g.stride.begin(), g.stride.end());
  for (int64_t v : g.dilation) d.dilation.push_back(v - 1);
  d.pad_l.assign(g.pad_begin.begin(), g.pad_begin.end());
  d.pad_r.assign(g.pad_end.begin(), g.pad_end.end());
  return d;
}

// The forward primitive's description, which the backward ones take as a hint.
dnnl::convolution_forward::primitive_desc ForwardHint(const Descs& d) {
  const dnnl::convolution_forward::desc fwd(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                            d.x_any, d.w_any, d.y_any, d.strides, d.dilation, d.pad_l, d.pad_r);
  return dnnl::convolution_forward::primitive_desc(fwd, onednn::Engine());
}

struct DataEntry {
  dnnl::convolution_backward_data::primitive_desc pd;
  dnnl::convolution_backward_data prim;
  Moved dy, w, dx;
};

struct WeightsEntry {
  dnnl::convolution_backward_weights::primitive_desc pd;
  dnnl::convolution_backward_weights prim;
  Moved dy, x, dw;
};

StatusOr<DataEntry> MakeData(const ConvProblem& p) {
  DataEntry e;
  try {
    const Descs d = MakeDescs(p);
    const dnnl::convolution_backward_data::desc bwd(dnnl::algorithm::convolution_direct, d.x_any, d.w_any, d.y_any,
                                                    d.strides, d.dilation, d.pad_l, d.pad_r);
    e.pd = dnnl::convolution_backward_data::primitive_desc(bwd, onednn::UserScratchpadAttr(), onednn::Engine(),
                                                           ForwardHint(d));
    e.prim = dnnl::convolution_backward_data(e.pd);
    e.dy.Make(d.y_user, e.pd.diff_dst_desc(), true);
    e.w.Make(d.w_user, e.pd.weights_desc(), true);
    e.dx.Make(d.x_user, e.pd.diff_src_desc(), false);
  } catch (const dnnl::error& err) {
    return onednn::ErrorStatus("convolution backward data", err);
  }
  return e;
}

StatusOr<WeightsEntry> MakeWeights(const ConvProblem& p) {
  WeightsEntry e;
  try {
    const Descs d = MakeDescs(p);
    const dnnl::convolution_backward_weights::desc bwd(dnnl::algorithm::convolution_direct, d.x_any, d.w_any, d.y_any,
                                                       d.strides, d.dilation, d.pad_l, d.pad_r);
    e.pd = dnnl::convolution_backward_weights::primitive_desc(bwd, onednn::UserScratchpadAttr(), onednn::Engine(),
                                                              ForwardHint(d));
    e.prim = dnnl::convolution_backward_weights(e.pd);
    e.dy.Make(d.y_user, e.pd.diff_dst_desc(), true);
    e.x.Make(d.x_user, e.pd.src_desc(), true);
    e.dw.Make(d.w_user, e.pd.diff_weights_desc(), false);
  } catch (const dnnl::error& err) {
    return onednn::ErrorStatus("convolution backward weights", err);
  }
  return e;
}

// The cache key of a problem with `n` images.
std::vector<int64_t> Key(const ConvProblem& p, int64_t n) {
  std::vector<int64_t> key = {n, p.c, p.m, p.group};
  const WindowGeometry& g = p.geo;
  for (const std::vector<int64_t>* v : {&g.in, &g.out, &g.kernel, &g.stride, &g.dilation, &g.pad_begin, &g.pad_end}) {
    key.push_back(static_cast<int64_t>(v->size()));
    key.insert(key.end(), v->begin(), v->end());
  }
  return key;
}

}  // namespace

struct OneDnnConvGrad::Cache {
  onednn::Cache<DataEntry> data;
  onednn::Cache<WeightsEntry> weights;
};

OneDnnConvGrad::OneDnnConvGrad() : cache_(std::make_unique<Cache>()) {}

bool OneDnnConvGrad::Supported(const ConvProblem& p) {
  const size_t r = p.geo.rank();
  return r >= 1 && r <= 3 && p.group >= 1 && p.c % p.group == 0 && p.m % p.group == 0;
}

Status OneDnnConvGrad::DataPart(const ConvProblem& p, const float* dy, const float* w, float* dx, int64_t n0,
                                int64_t nn) const {
  const int64_t x_image = p.c * p.geo.in_size(), y_image = p.m * p.geo.out_size();
  onednn::SetNumThreads(1);
  ONNXAMP_ASSIGN_OR_RETURN(auto e, cache_->data.Get(Key(p, nn), [&] {
    ConvProblem q = p;
    q.n = nn;
    return MakeData(q);
  }));
  try {
    ONNXAMP_ASSIGN_OR_RETURN(void* pdy, e->dy.In(dy + n0 * y_image, 1));
    ONNXAMP_ASSIGN_OR_RETURN(void* pw, e->w.In(w, 2));
    float* user_dx = dx + n0 * x_image;
    void* pdx = e->dx.OutBuffer(user_dx, 3);
    ONNXAMP_RETURN_IF_ERROR(onednn::Execute(e->prim, e->pd,
                                            {{DNNL_ARG_DIFF_DST, onednn::Wrap(e->dy.prim, pdy)},
                                             {DNNL_ARG_WEIGHTS, onednn::Wrap(e->w.prim, pw)},
                                             {DNNL_ARG_DIFF_SRC, onednn::Wrap(e->dx.prim, pdx)}},
                                            "convolution backward data"));
    return e->dx.Out(pdx, user_dx);
  } catch (const dnnl::error& err) {
    return onednn::ErrorStatus("convolution backward data", err);
  }
}

Status OneDnnConvGrad::WeightsBlock(const ConvProblem& p, const float* dy, const float* x, float* out, int64_t n0,
                                    int64_t nn) const {
  const int64_t x_image = p.c * p.geo.in_size(), y_image = p.m * p.geo.out_size();
  onednn::SetNumThreads(1);
  ONNXAMP_ASSIGN_OR_RETURN(auto e, cache_->weights.Get(Key(p, nn), [&] {
    ConvProblem q = p;
    q.n = nn;
    return MakeWeights(q);
  }));
  try {
    ONNXAMP_ASSIGN_OR_RETURN(void* pdy, e->dy.In(dy + n0 * y_image, 1));
    ONNXAMP_ASSIGN_OR_RETURN(void* px, e->x.In(x + n0 * x_image, 2));
    void* pdw = e->dw.OutBuffer(out, 3);
    ONNXAMP_RETURN_IF_ERROR(onednn::Execute(e->prim, e->pd,
                                            {{DNNL_ARG_DIFF_DST, onednn::Wrap(e->dy.prim, pdy)},
                                             {DNNL_ARG_SRC, onednn::Wrap(e->x.prim, px)},
                                             {DNNL_ARG_DIFF_WEIGHTS, onednn::Wrap(e->dw.prim, pdw)}},
                                            "convolution backward weights"));
    return e->dw.Out(pdw, out);
  } catch (const dnnl::error& err) {
    return onednn::ErrorStatus("convolution backward weights", err);
  }
}

Status OneDnnConvGrad::Backward(const ConvProblem& p, const float* dy, const float* w, const float* x, float* dx,
                                float* dw, exec::ThreadPool& threads) const {
  const int64_t w_size = p.m * (p.c / p.group) * p.geo.kernel_size();
  if (p.n == 0) {
    if (dw) std::fill(dw, dw + w_size, 0.0f);
    return Status::Ok();
  }
  const std::vector<Task> tasks = Plan(p.n, dx != nullptr, dw != nullptr, threads.num_threads());
  // Weight block 0 writes dw, the others partial sums, added in block order afterwards.
  int64_t blocks = 0;
  for (const Task& t : tasks) blocks += t.kind == Task::kWeights;
  std::vector<float> partials(static_cast<size_t>(std::max<int64_t>(0, blocks - 1) * w_size));
  ONNXAMP_RETURN_IF_ERROR(onednn::ParallelParts(threads, static_cast<int64_t>(tasks.size()), [&](int64_t i) {
    const Task& t = tasks[static_cast<size_t>(i)];
    if (t.kind == Task::kData) return DataPart(p, dy, w, dx, t.first, t.count);
    const int64_t block = t.first / kImagesPerBlock;
    return WeightsBlock(p, dy, x, block == 0 ? dw : partials.data() + (block - 1) * w_size, t.first, t.count);
  }));
  for (int64_t block = 1; block < blocks; ++block) {
    const float* part = partials.data() + (block - 1) * w_size;
    for (int64_t i = 0; i < w_size; ++i) dw[i] += part[i];
  }
  return Status::Ok();
}

#else  // !ONNXAMP_WITH_DNNL

struct OneDnnConvGrad::Cache {};
OneDnnConvGrad::OneDnnConvGrad() = default;
bool OneDnnConvGrad::Supported(const ConvProblem&) { return false; }
Status OneDnnConvGrad::Backward(const ConvProblem&, const float*, const float*, const float*, float*, float*,
                                exec::ThreadPool&) const {
  return Internal("oneDNN is not part of this build");
}

#endif  // ONNXAMP_WITH_DNNL

OneDnnConvGrad::~OneDnnConvGrad() = default;

}  // namespace onnxamp::ops
