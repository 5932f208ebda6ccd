// NonMaxSuppression (CPU, opsets 10-25).
//
//   NonMaxSuppression(boxes [B, N, 4], scores [B, K, N], max_output_boxes_per_class?, iou_threshold?,
//                     score_threshold?; center_point_box) -> selected_indices [S, 3] int64 (batch, class, box)
//
// Per batch and class: the boxes whose score is above score_threshold (all without one), taken by decreasing score
// (the lower box index first on ties), each kept unless its IoU with a box already kept exceeds iou_threshold, until
// max_output_boxes_per_class are kept (0 or absent: none). Results are in batch, class, decreasing-score order, as
// ONNX Runtime gives them. Boxes are [y1, x1, y2, x2] with either diagonal (center_point_box 0) or [x_center,
// y_center, width, height] (1). Boxes of zero area and disjoint boxes never suppress.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {
namespace {

struct Box {
  float y1, x1, y2, x2;  // y1 <= y2, x1 <= x2
  float Area() const { return (y2 - y1) * (x2 - x1); }
};

// Whether a and b overlap by more than `threshold` (intersection over union).
bool Suppresses(const Box& a, const Box& b, float threshold) {
  const float ih = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  const float iw = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  if (ih <= 0.0f || iw <= 0.0f) return false;
  const float area_a = a.Area(), area_b = b.Area();
  if (area_a <= 0.0f || area_b <= 0.0f) return false;
  const float inter = ih * iw;
  return inter / (area_a + area_b - inter) > threshold;
}

class NonMaxSuppressionCpu : public exec::OpKernel {
 public:
  NonMaxSuppressionCpu(const exec::KernelInfo& info, Status* st) {
    auto c = IntAttribute(info.node, "center_point_box", 0);
    if (!c.ok()) {
      *st = c.status();
    } else if (*c != 0 && *c != 1) {
      *st = InvalidArgument("attribute 'center_point_box' is ", *c, ", expected 0 or 1");
    } else {
      center_ = *c == 1;
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* boxes_t, RequireInput(ctx, 0, "boxes"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* scores_t, RequireInput(ctx, 1, "scores"));
    const std::string bl = InputLabel(ctx, 0, "boxes"), sl = InputLabel(ctx, 1, "scores");
    if (boxes_t->dtype() != DType::kFloat32 || scores_t->dtype() != DType::kFloat32) {
      return InvalidArgument(bl, " and ", sl, " must be float, got ", DTypeName(boxes_t->dtype()), " and ",
                             DTypeName(scores_t->dtype()));
    }
    if (boxes_t->rank() != 3 || boxes_t->dims()[2] != 4) {
      return InvalidArgument(bl, " must be [num_batches, spatial_dimension, 4], got ", ShapeToString(boxes_t->dims()));
    }
    const int64_t batches = boxes_t->dims()[0], n = boxes_t->dims()[1];
    if (scores_t->rank() != 3 || scores_t->dims()[0] != batches || scores_t->dims()[2] != n) {
      return InvalidArgument(sl, " must be [", batches, ", num_classes, ", n, "] for boxes ",
                             ShapeToString(boxes_t->dims()), ", got ", ShapeToString(scores_t->dims()));
    }
    const int64_t classes = scores_t->dims()[1];
    int64_t max_out = 0;
    float iou = 0.0f;
    std::optional<float> score_threshold;
    if (const ir::Tensor* t = ctx.input(2); t && t->num_elements() > 0) {
      ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> v,
                               ReadInt64s(*t, InputLabel(ctx, 2, "max_output_boxes_per_class"), true));
      max_out = std::max<int64_t>(v[0], 0);
    }
    ONNXAMP_ASSIGN_OR_RETURN(std::optional<float> iou_in, ScalarFloat(ctx, 3, "iou_threshold"));
    if (iou_in) iou = *iou_in;
    if (!(iou >= 0.0f && iou <= 1.0f)) {
      return InvalidArgument(InputLabel(ctx, 3, "iou_threshold"), " is ", iou, ", expected a value in [0, 1]");
    }
    ONNXAMP_ASSIGN_OR_RETURN(score_threshold, ScalarFloat(ctx, 4, "score_threshold"));

    const float* pb = boxes_t->values<float>().data();
    const float* ps = scores_t->values<float>().data();
    std::vector<int64_t> selected;  // triples
    std::vector<Box> boxes(static_cast<size_t>(n));
    std::vector<int64_t> order;
    std::vector<int64_t> kept;
    for (int64_t b = 0; b < batches && max_out > 0; ++b) {
      for (int64_t i = 0; i < n; ++i) boxes[static_cast<size_t>(i)] = ReadBox(pb + (b * n + i) * 4);
      for (int64_t c = 0; c < classes; ++c) {
        const float* s = ps + (b * classes + c) * n;
        order.clear();
        for (int64_t i = 0; i < n; ++i) {
          if (std::isnan(s[i])) return InvalidArgument(sl, " holds NaN at [", b, ", ", c, ", ", i, "]");
          if (!score_threshold || s[i] > *score_threshold) order.push_back(i);
        }
        std::stable_sort(order.begin(), order.end(), [&](int64_t l, int64_t r) { return s[l] > s[r]; });
        kept.clear();
        for (int64_t i : order) {
          if (static_cast<int64_t>(kept.size()) >= max_out) break;
          const Box& box = boxes[static_cast<size_t>(i)];
          const bool suppressed = std::any_of(
              kept.begin(), kept.end(), [&](int64_t k) { return Suppresses(boxes[static_cast<size_t>(k)], box, iou); });
          if (suppressed) continue;
          kept.push_back(i);
          selected.insert(selected.end(), {b, c, i});
        }
      }
    }
    const int64_t count = static_cast<int64_t>(selected.size() / 3);
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, DType::kInt64, {count, 3}));
    std::copy(selected.begin(), selected.end(), y->mutable_values<int64_t>().begin());
    return Status::Ok();
  }

 private:
  Box ReadBox(const float* v) const {
    if (center_) {
      const float xc = v[0], yc = v[1], w = v[2] / 2.0f, h = v[3] / 2.0f;
      return {yc - h, xc - w, yc + h, xc + w};
    }
    return {std::min(v[0], v[2]), std::min(v[1], v[3]), std::max(v[0], v[2]), std::max(v[1], v[3])};
  }

  // A float scalar input (one element); nullopt when omitted or empty.
  static StatusOr<std::optional<float>> ScalarFloat(const exec::KernelContext& ctx, size_t i, const char* role) {
    const ir::Tensor* t = ctx.input(i);
    if (t == nullptr || t->num_elements() == 0) return std::optional<float>();
    if (t->dtype() != DType::kFloat32 || t->num_elements() != 1) {
      return InvalidArgument(InputLabel(ctx, i, role), " must be one float, got ", DTypeName(t->dtype()), " ",
                             ShapeToString(t->dims()));
    }
    return std::optional<float>(t->values<float>()[0]);
  }

  bool center_ = false;
};

}  // namespace

void RegisterNonMaxSuppressionKernels(exec::KernelRegistry& r) {
  r.Register({"NonMaxSuppression", "", 10, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<NonMaxSuppressionCpu>});
}

}  // namespace onnxamp::ops
