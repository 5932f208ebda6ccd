// Sliding-window geometry shared by Conv, ConvTranspose and the pooling ops: the attributes (auto_pad,
// kernel_shape, strides, dilations, pads, output_padding, output_shape), how they resolve against an input shape,
// and the output sizes they give.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/graph.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::ops {

enum class AutoPad { kNotSet, kValid, kSameUpper, kSameLower };

// The window attributes as written on the node; empty vectors mean "not given".
struct WindowAttrs {
  AutoPad auto_pad = AutoPad::kNotSet;
  std::vector<int64_t> kernel_shape;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads;            // all begins, then all ends
  std::vector<int64_t> output_padding;  // ConvTranspose
  std::vector<int64_t> output_shape;    // ConvTranspose
};

// Which attributes an op has.
struct WindowAttrSpec {
  bool kernel_shape_required = false;  // pooling: yes; Conv/ConvTranspose: optional (taken from W)
  bool transpose = false;              // output_padding and output_shape
};

// Reads and checks the window attributes: auto_pad is one of NOTSET/VALID/SAME_UPPER/SAME_LOWER, strides and
// dilations are >= 1, pads >= 0, kernel_shape >= 1, and the lists agree in length. Errors name the attribute.
Status ParseWindowAttrs(const ir::Node& node, const WindowAttrSpec& spec, WindowAttrs* out);

// An integer attribute that must be an INT when present.
Status GetIntAttr(const ir::Node& node, const char* name, int64_t default_value, int64_t* out);

// The attributes of Conv, FusedConv, ChannelsLastConv and ConvTranspose (`transpose`): the window attributes, `group`
// (>= 1) and, on FusedConv and ChannelsLastConv, `activation` ("Relu" or empty; `relu` may be null for ops without
// it). Shared by every backend.
Status ParseConvAttrs(const ir::Node& node, bool transpose, WindowAttrs* window, int64_t* group, bool* relu);

// The `round_to` attribute of FusedConv and BlockedConv (CPU): 10 (FLOAT16) when the float node stands in for a
// float16 one and rounds its output to float16 values (the graph optimizer's ComputeHalfConvsInFloat), else absent
// or 0. Any other value is an error; `round_half` says whether to round.
Status ParseRoundTo(const ir::Node& node, bool* round_half);

// Per spatial dimension: the resolved window.
struct WindowGeometry {
  std::vector<int64_t> in;         // input sizes
  std::vector<int64_t> kernel;     // kernel sizes
  std::vector<int64_t> stride;     // >= 1
  std::vector<int64_t> dilation;   // >= 1
  std::vector<int64_t> pad_begin;  // may be negative for ConvTranspose (an explicit output_shape that is larger)
  std::vector<int64_t> pad_end;
  std::vector<int64_t> out;  // output sizes

  size_t rank() const { return in.size(); }
  // Elements of one input plane, one output plane, one kernel.
  int64_t in_size() const { return Count(in); }
  int64_t out_size() const { return Count(out); }
  int64_t kernel_size() const { return Count(kernel); }

 private:
  static int64_t Count(const std::vector<int64_t>& dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
};

// The row-major coordinates of element `flat` of a box of sizes `dims` (coords has dims.size() entries).
inline void UnravelIndex(int64_t flat, const std::vector<int64_t>& dims, std::vector<int64_t>& coords) {
  for (size_t i = dims.size(); i-- > 0;) {
    coords[i] = flat % dims[i];
    flat /= dims[i];
  }
}

// The sizes of one Conv or ConvTranspose call, read from its inputs.
struct ConvShape {
  int64_t n = 0, c = 0;  // images and input channels
  int64_t m = 0;         // output channels
  int64_t group = 1;
  std::vector<int64_t> in;      // input spatial sizes
  std::vector<int64_t> kernel;  // kernel spatial sizes
};

// The input checks Conv and ConvTranspose share: X and W present, W and B of X's element type, X of rank >= 3 and W
// of the same rank, channels consistent with `group` (Conv: W is [M, C/group, k...]; ConvTranspose: W is
// [C, M/group, k...]), the attribute kernel_shape (when given) equal to W's spatial dims, and B of shape [M].
// Errors name the input, the expected and the given shape or type.
StatusOr<ConvShape> CheckConvInputs(const ir::Tensor* x, const ir::Tensor* w, const ir::Tensor* b,
                                    const WindowAttrs& attrs, int64_t group, bool transpose);

// Conv and pooling: resolves `attrs` for input sizes `in` and kernel sizes `kernel`. `ceil_mode` rounds the
// output size up (pooling), dropping a last window that would start in the end padding. Fails when a dimension
// gives no output (the effective kernel is larger than the padded input) or the lists have the wrong length.
StatusOr<WindowGeometry> ForwardGeometry(const WindowAttrs& attrs, const std::vector<int64_t>& in,
                                         const std::vector<int64_t>& kernel, bool ceil_mode = false);

// ConvTranspose: output size s*(in-1) + output_padding + (k-1)*d + 1 - pad_begin - pad_end, or the given
// output_shape (pads derived from it; SAME_UPPER puts the odd padding at the end, otherwise at the beginning, as
// the ONNX specification says), or in*s for SAME_UPPER/SAME_LOWER without output_shape.
StatusOr<WindowGeometry> TransposeGeometry(const WindowAttrs& attrs, const std::vector<int64_t>& in,
                                           const std::vector<int64_t>& kernel);

}  // namespace onnxamp::ops
