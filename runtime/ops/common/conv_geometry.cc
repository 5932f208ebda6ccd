// Sliding-window geometry shared by Conv, ConvTranspose and the pooling ops (see conv_geometry.h).
#include "runtime/ops/common/conv_geometry.h"

#include <algorithm>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/common/broadcast.h"

namespace onnxamp::ops {
namespace {

// Floor division (the ONNX reference computes its paddings with Python's //).
int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t CeilDiv(int64_t a, int64_t b) { return -FloorDiv(-a, b); }

Status GetIntsAttr(const ir::Node& node, const char* name, std::vector<int64_t>* out) {
  const ir::Attribute* a = node.FindAttribute(name);
  if (!a) return Status::Ok();
  if (a->type() != ir::AttrType::kInts) {
    return InvalidArgument("attribute '", name, "' must be INTS, got ", ir::AttrTypeName(a->type()));
  }
  *out = a->ints;
  return Status::Ok();
}

Status CheckAtLeast(const char* name, const std::vector<int64_t>& v, int64_t min) {
  for (int64_t x : v) {
    if (x < min) return InvalidArgument("attribute '", name, "' must hold values >= ", min, ", got ", ShapeToString(v));
  }
  return Status::Ok();
}

// The per-dim value of an optional list attribute (`def` when absent), after checking its length.
Status PerDim(const char* name, const std::vector<int64_t>& given, size_t rank, int64_t def,
              std::vector<int64_t>* out) {
  if (given.empty()) {
    out->assign(rank, def);
    return Status::Ok();
  }
  if (given.size() != rank) {
    return InvalidArgument("attribute '", name, "' has ", given.size(), " values ", ShapeToString(given), ", expected ",
                           rank, " (one per spatial dimension)");
  }
  *out = given;
  return Status::Ok();
}

Status CommonDims(const WindowAttrs& attrs, const std::vector<int64_t>& in, const std::vector<int64_t>& kernel,
                  WindowGeometry* g) {
  const size_t n = in.size();
  if (kernel.size() != n) {
    return InvalidArgument("the kernel has ", kernel.size(), " spatial dimensions ", ShapeToString(kernel),
                           ", the input has ", n, " ", ShapeToString(in));
  }
  g->in = in;
  g->kernel = kernel;
  ONNXAMP_RETURN_IF_ERROR(PerDim("strides", attrs.strides, n, 1, &g->stride));
  ONNXAMP_RETURN_IF_ERROR(PerDim("dilations", attrs.dilations, n, 1, &g->dilation));
  g->pad_begin.assign(n, 0);
  g->pad_end.assign(n, 0);
  if (attrs.auto_pad == AutoPad::kNotSet && !attrs.pads.empty()) {
    if (attrs.pads.size() != 2 * n) {
      return InvalidArgument("attribute 'pads' has ", attrs.pads.size(), " values ", ShapeToString(attrs.pads),
                             ", expected ", 2 * n, " (begin and end per spatial dimension)");
    }
    for (size_t i = 0; i < n; ++i) {
      g->pad_begin[i] = attrs.pads[i];
      g->pad_end[i] = attrs.pads[i + n];
    }
  }
  return Status::Ok();
}

}  // namespace

Status GetIntAttr(const ir::Node& node, const char* name, int64_t default_value, int64_t* out) {
  const ir::Attribute* a = node.FindAttribute(name);
  if (!a) {
    *out = default_value;
    return Status::Ok();
  }
  if (a->type() != ir::AttrType::kInt) {
    return InvalidArgument("attribute '", name, "' must be INT, got ", ir::AttrTypeName(a->type()));
  }
  *out = a->i;
  return Status::Ok();
}

Status ParseConvAttrs(const ir::Node& node, bool transpose, WindowAttrs* window, int64_t* group, bool* relu) {
  WindowAttrSpec spec;
  spec.transpose = transpose;
  ONNXAMP_RETURN_IF_ERROR(ParseWindowAttrs(node, spec, window));
  ONNXAMP_RETURN_IF_ERROR(GetIntAttr(node, "group", 1, group));
  if (*group < 1) return InvalidArgument("attribute 'group' must be >= 1, got ", *group);
  if (relu) *relu = false;
  if (relu && (node.op_type() == exec::kFusedConvOp || node.op_type() == exec::kChannelsLastConvOp)) {
    const std::string act = node.GetString("activation", "");
    if (act != "" && act != "Relu") {
      return InvalidArgument("attribute 'activation' is '", act, "', expected 'Relu' or empty");
    }
    *relu = act == "Relu";
  }
  return Status::Ok();
}

Status ParseRoundTo(const ir::Node& node, bool* round_half) {
  int64_t to = 0;
  ONNXAMP_RETURN_IF_ERROR(GetIntAttr(node, "round_to", 0, &to));
  if (to != 0 && to != static_cast<int64_t>(DType::kFloat16)) {
    return InvalidArgument("attribute 'round_to' is ", to, ", expected 0 or ", static_cast<int>(DType::kFloat16),
                           " (FLOAT16)");
  }
  *round_half = to != 0;
  return Status::Ok();
}

Status ParseWindowAttrs(const ir::Node& node, const WindowAttrSpec& spec, WindowAttrs* out) {
  WindowAttrs w;
  if (const ir::Attribute* a = node.FindAttribute("auto_pad")) {
    if (a->type() != ir::AttrType::kString) {
      return InvalidArgument("attribute 'auto_pad' must be STRING, got ", ir::AttrTypeName(a->type()));
    }
    if (a->s == "NOTSET" || a->s.empty()) {
      w.auto_pad = AutoPad::kNotSet;
    } else if (a->s == "VALID") {
      w.auto_pad = AutoPad::kValid;
    } else if (a->s == "SAME_UPPER") {
      w.auto_pad = AutoPad::kSameUpper;
    } else if (a->s == "SAME_LOWER") {
      w.auto_pad = AutoPad::kSameLower;
    } else {
      return InvalidArgument("attribute 'auto_pad' is '", a->s,
                             "', expected one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
    }
  }
  ONNXAMP_RETURN_IF_ERROR(GetIntsAttr(node, "kernel_shape", &w.kernel_shape));
  if (spec.kernel_shape_required && w.kernel_shape.empty()) {
    return InvalidArgument("attribute 'kernel_shape' is required");
  }
  ONNXAMP_RETURN_IF_ERROR(CheckAtLeast("kernel_shape", w.kernel_shape, 1));
  ONNXAMP_RETURN_IF_ERROR(GetIntsAttr(node, "strides", &w.strides));
  ONNXAMP_RETURN_IF_ERROR(CheckAtLeast("strides", w.strides, 1));
  ONNXAMP_RETURN_IF_ERROR(GetIntsAttr(node, "dilations", &w.dilations));
  ONNXAMP_RETURN_IF_ERROR(CheckAtLeast("dilations", w.dilations, 1));
  ONNXAMP_RETURN_IF_ERROR(GetIntsAttr(node, "pads", &w.pads));
  ONNXAMP_RETURN_IF_ERROR(CheckAtLeast("pads", w.pads, 0));
  if (w.pads.size() % 2 != 0) {
    return InvalidArgument("attribute 'pads' has an odd number of values ", ShapeToString(w.pads),
                           " (expected begin and end per spatial dimension)");
  }
  if (spec.transpose) {
    ONNXAMP_RETURN_IF_ERROR(GetIntsAttr(node, "output_padding", &w.output_padding));
    ONNXAMP_RETURN_IF_ERROR(CheckAtLeast("output_padding", w.output_padding, 0));
    ONNXAMP_RETURN_IF_ERROR(GetIntsAttr(node, "output_shape", &w.output_shape));
    ONNXAMP_RETURN_IF_ERROR(CheckAtLeast("output_shape", w.output_shape, 0));
  }
  // Lists whose length is known must agree with each other (the input's rank is checked at run time).
  const std::vector<int64_t>* lists[] = {&w.kernel_shape, &w.strides, &w.dilations};
  const char* names[] = {"kernel_shape", "strides", "dilations"};
  size_t rank = w.pads.size() / 2;
  const char* rank_from = w.pads.empty() ? nullptr : "pads";
  for (int i = 0; i < 3; ++i) {
    if (lists[i]->empty()) continue;
    if (rank_from && lists[i]->size() != rank) {
      return InvalidArgument("attribute '", names[i], "' has ", lists[i]->size(), " values but '", rank_from,
                             "' implies ", rank, " spatial dimensions");
    }
    rank = lists[i]->size();
    rank_from = names[i];
  }
  *out = std::move(w);
  return Status::Ok();
}

StatusOr<ConvShape> CheckConvInputs(const ir::Tensor* x, const ir::Tensor* w, const ir::Tensor* b,
                                    const WindowAttrs& attrs, int64_t group, bool transpose) {
  if (!x || !w) return InvalidArgument("inputs X and W are required");
  for (const ir::Tensor* t : {w, b}) {
    if (t && t->dtype() != x->dtype()) {
      return InvalidArgument("input ", t == w ? "W" : "B", " has element type ", DTypeName(t->dtype()), ", expected ",
                             DTypeName(x->dtype()), " (the type of X)");
    }
  }
  if (x->rank() < 3) {
    return InvalidArgument("input X must have rank >= 3 ([N, C, spatial...]), got ", ShapeToString(x->dims()));
  }
  if (w->rank() != x->rank()) {
    return InvalidArgument("input W has shape ", ShapeToString(w->dims()), ", expected rank ", x->rank(),
                           " (that of X ", ShapeToString(x->dims()), ")");
  }
  ConvShape s;
  s.n = x->dims()[0];
  s.c = x->dims()[1];
  s.group = group;
  if (transpose) {
    s.m = w->dims()[1] * group;
    if (w->dims()[0] != s.c) {
      return InvalidArgument("input X ", ShapeToString(x->dims()), " has ", s.c, " channels but W ",
                             ShapeToString(w->dims()), " expects ", w->dims()[0]);
    }
    if (s.c % group != 0) {
      return InvalidArgument("input X ", ShapeToString(x->dims()), " has ", s.c, " channels, not a multiple of group ",
                             group);
    }
  } else {
    s.m = w->dims()[0];
    if (s.c != w->dims()[1] * group) {
      return InvalidArgument("input X ", ShapeToString(x->dims()), " has ", s.c, " channels but W ",
                             ShapeToString(w->dims()), " with group ", group, " expects ", w->dims()[1] * group);
    }
    if (s.m % group != 0) {
      return InvalidArgument("input W ", ShapeToString(w->dims()), " has ", s.m,
                             " output channels, not a multiple of group ", group);
    }
  }
  s.in.assign(x->dims().begin() + 2, x->dims().end());
  s.kernel.assign(w->dims().begin() + 2, w->dims().end());
  if (!attrs.kernel_shape.empty() && attrs.kernel_shape != s.kernel) {
    return InvalidArgument("attribute 'kernel_shape' ", ShapeToString(attrs.kernel_shape),
                           " disagrees with W's spatial dims ", ShapeToString(s.kernel));
  }
  if (b && (b->rank() != 1 || b->dims()[0] != s.m)) {
    return InvalidArgument("input B has shape ", ShapeToString(b->dims()), ", expected [", s.m, "]");
  }
  return s;
}

StatusOr<WindowGeometry> ForwardGeometry(const WindowAttrs& attrs, const std::vector<int64_t>& in,
                                         const std::vector<int64_t>& kernel, bool ceil_mode) {
  WindowGeometry g;
  ONNXAMP_RETURN_IF_ERROR(CommonDims(attrs, in, kernel, &g));
  const size_t n = in.size();
  g.out.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const int64_t s = g.stride[i];
    const int64_t k_eff = (g.kernel[i] - 1) * g.dilation[i] + 1;
    if (attrs.auto_pad == AutoPad::kSameUpper || attrs.auto_pad == AutoPad::kSameLower) {
      g.out[i] = CeilDiv(in[i], s);
      const int64_t total = std::max<int64_t>(0, (g.out[i] - 1) * s + k_eff - in[i]);
      const int64_t smaller = total / 2;
      g.pad_begin[i] = attrs.auto_pad == AutoPad::kSameUpper ? smaller : total - smaller;
      g.pad_end[i] = total - g.pad_begin[i];
      continue;
    }
    const int64_t span = in[i] + g.pad_begin[i] + g.pad_end[i] - k_eff;
    if (span < 0) {
      return InvalidArgument("spatial dimension ", i, ": the window (kernel ", g.kernel[i], ", dilation ",
                             g.dilation[i], ": ", k_eff, " wide) is larger than the input (", in[i], ") plus padding (",
                             g.pad_begin[i], " + ", g.pad_end[i], ")");
    }
    g.out[i] = (ceil_mode ? CeilDiv(span, s) : span / s) + 1;
    // A last window that would start in the end padding is dropped (as PyTorch and ONNX Runtime do).
    if (ceil_mode && (g.out[i] - 1) * s >= in[i] + g.pad_begin[i]) --g.out[i];
  }
  return g;
}

StatusOr<WindowGeometry> TransposeGeometry(const WindowAttrs& attrs, const std::vector<int64_t>& in,
                                           const std::vector<int64_t>& kernel) {
  WindowGeometry g;
  ONNXAMP_RETURN_IF_ERROR(CommonDims(attrs, in, kernel, &g));
  const size_t n = in.size();
  std::vector<int64_t> output_padding;
  ONNXAMP_RETURN_IF_ERROR(PerDim("output_padding", attrs.output_padding, n, 0, &output_padding));
  std::vector<int64_t> output_shape = attrs.output_shape;
  if (output_shape.size() == n + 2) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  if (!output_shape.empty() && output_shape.size() != n) {
    return InvalidArgument("attribute 'output_shape' has ", attrs.output_shape.size(), " values ",
                           ShapeToString(attrs.output_shape), ", expected ", n, " (the spatial output sizes)");
  }
  g.out.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const int64_t s = g.stride[i];
    if (output_padding[i] >= s && output_padding[i] >= g.dilation[i]) {
      return InvalidArgument("attribute 'output_padding' (", output_padding[i], " in spatial dimension ", i,
                             ") must be smaller than the stride (", s, ") or the dilation (", g.dilation[i], ")");
    }
    const int64_t full = s * (in[i] - 1) + output_padding[i] + (g.kernel[i] - 1) * g.dilation[i] + 1;
    const bool same = attrs.auto_pad == AutoPad::kSameUpper || attrs.auto_pad == AutoPad::kSameLower;
    if (!output_shape.empty() || same) {
      g.out[i] = !output_shape.empty() ? output_shape[i] : in[i] * s;
      const int64_t total = full - g.out[i];
      // ONNX: SAME_UPPER puts the odd padding at the end, anything else at the beginning.
      const int64_t half = FloorDiv(total, 2);
      g.pad_begin[i] = attrs.auto_pad == AutoPad::kSameUpper ? half : total - half;
      g.pad_end[i] = total - g.pad_begin[i];
    } else {
      g.out[i] = full - g.pad_begin[i] - g.pad_end[i];
    }
    if (g.out[i] < 0) {
      return InvalidArgument("spatial dimension ", i, ": the output size ", g.out[i],
                             " is negative (pads larger than the output)");
    }
  }
  return g;
}

}  // namespace onnxamp::ops
