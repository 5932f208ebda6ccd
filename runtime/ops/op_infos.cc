// The explicit list of op folders that register OpInfos (static registration objects would be dropped by the linker
// from a static library; the count is checked so that a folder cannot be lost), and the OpInfos of the ops the
// runtime has no kernel for, which have no folder: the converter and the placement still need their facts. When
// one of them gets a kernel, its OpInfo moves to its folder (tests/trainer/gradient_coverage_test.cc checks).
#include <array>

#include "runtime/ops/op_info.h"

namespace onnxamp::ops {

void RegisterArgMaxOpInfos(OpInfoRegistry& r);           // argmax/argmax_info.cc
void RegisterBatchNormOpInfos(OpInfoRegistry& r);        // batch_norm/batch_norm_grad.cc
void RegisterCastOpInfos(OpInfoRegistry& r);             // cast/cast_grad.cc
void RegisterClipOpInfos(OpInfoRegistry& r);             // clip/clip_grad.cc
void RegisterControlFlowOpInfos(OpInfoRegistry& r);      // control_flow/control_flow_info.cc
void RegisterCompressOpInfos(OpInfoRegistry& r);         // compress/compress_grad.cc
void RegisterConcatOpInfos(OpInfoRegistry& r);           // concat/concat_grad.cc
void RegisterConstantOpInfos(OpInfoRegistry& r);         // constant/constant_info.cc
void RegisterConvOpInfos(OpInfoRegistry& r);             // conv/conv_grad.cc
void RegisterConvTransposeOpInfos(OpInfoRegistry& r);    // conv_transpose/conv_transpose_grad.cc
void RegisterDetOpInfos(OpInfoRegistry& r);              // det/det_grad.cc
void RegisterDetectionOpInfos(OpInfoRegistry& r);        // detection/detection_grad.cc
void RegisterDepthSpaceOpInfos(OpInfoRegistry& r);       // depth_space/depth_space_grad.cc
void RegisterDropoutOpInfos(OpInfoRegistry& r);          // dropout/dropout_grad.cc
void RegisterEinsumOpInfos(OpInfoRegistry& r);           // einsum/einsum_grad.cc
void RegisterElementwiseOpInfos(OpInfoRegistry& r);      // elementwise/elementwise_grad.cc
void RegisterExpandOpInfos(OpInfoRegistry& r);           // expand/expand_grad.cc
void RegisterGatherOpInfos(OpInfoRegistry& r);           // gather/gather_grad.cc
void RegisterGemmOpInfos(OpInfoRegistry& r);             // gemm/gemm_grad.cc
void RegisterGridSampleOpInfos(OpInfoRegistry& r);       // grid_sample/grid_sample_grad.cc
void RegisterGroupNormOpInfos(OpInfoRegistry& r);        // group_norm/group_norm_grad.cc
void RegisterIdentityOpInfos(OpInfoRegistry& r);         // identity/identity_grad.cc
void RegisterInstanceNormOpInfos(OpInfoRegistry& r);     // instance_norm/instance_norm_info.cc
void RegisterLayerNormOpInfos(OpInfoRegistry& r);        // layer_norm/layer_norm_grad.cc
void RegisterLayoutOpInfos(OpInfoRegistry& r);           // layout/layout_info.cc
void RegisterLossOpInfos(OpInfoRegistry& r);             // loss/loss_grad.cc
void RegisterLrnOpInfos(OpInfoRegistry& r);              // lrn/lrn_grad.cc
void RegisterMatMulOpInfos(OpInfoRegistry& r);           // matmul/matmul_grad.cc
void RegisterMinMaxOpInfos(OpInfoRegistry& r);           // min_max/min_max_grad.cc
void RegisterPadOpInfos(OpInfoRegistry& r);              // pad/pad_grad.cc
void RegisterPoolOpInfos(OpInfoRegistry& r);             // pool/pool_grad.cc
void RegisterQuantizeOpInfos(OpInfoRegistry& r);         // quantize/quantize_grad.cc
void RegisterRandomOpInfos(OpInfoRegistry& r);           // random/random_info.cc
void RegisterRangeOpInfos(OpInfoRegistry& r);            // range/range_info.cc
void RegisterRecurrentOpInfos(OpInfoRegistry& r);        // rnn/rnn_grad.cc
void RegisterReduceOpInfos(OpInfoRegistry& r);           // reduce/reduce_grad.cc
void RegisterReshapeOpInfos(OpInfoRegistry& r);          // reshape/reshape_grad.cc
void RegisterResizeOpInfos(OpInfoRegistry& r);           // resize/resize_grad.cc
void RegisterScatterOpInfos(OpInfoRegistry& r);          // scatter/scatter_grad.cc
void RegisterReverseSequenceOpInfos(OpInfoRegistry& r);  // reverse_sequence/reverse_sequence_grad.cc
void RegisterShapeOpInfos(OpInfoRegistry& r);            // shape/shape_info.cc
void RegisterSliceOpInfos(OpInfoRegistry& r);            // slice/slice_grad.cc
void RegisterSoftmaxOpInfos(OpInfoRegistry& r);          // softmax/softmax_grad.cc
void RegisterSpectralOpInfos(OpInfoRegistry& r);         // spectral/spectral_grad.cc
void RegisterSplitOpInfos(OpInfoRegistry& r);            // split/split_grad.cc
void RegisterSqueezeOpInfos(OpInfoRegistry& r);          // squeeze/squeeze_grad.cc
void RegisterTileOpInfos(OpInfoRegistry& r);             // tile/tile_grad.cc
void RegisterTriluOpInfos(OpInfoRegistry& r);            // trilu/trilu_grad.cc
void RegisterCumSumOpInfos(OpInfoRegistry& r);           // cumsum/cumsum_grad.cc
void RegisterNormalizeOpInfos(OpInfoRegistry& r);        // normalize/normalize_grad.cc
void RegisterOneHotOpInfos(OpInfoRegistry& r);           // one_hot/one_hot_info.cc
void RegisterTopKOpInfos(OpInfoRegistry& r);             // topk/topk_grad.cc
void RegisterTransposeOpInfos(OpInfoRegistry& r);        // transpose/transpose_grad.cc
void RegisterUniqueOpInfos(OpInfoRegistry& r);           // unique/unique_info.cc
void RegisterTextOpInfos(OpInfoRegistry& r);             // text/text_info.cc
void RegisterPreviewTrainingOpInfos(OpInfoRegistry& r);  // preview_training/preview_training_info.cc
void RegisterWhereOpInfos(OpInfoRegistry& r);            // where/where_grad.cc

namespace {

// Ops without a kernel in the runtime: none at present (an op the converter must know facts of before the runtime
// runs it gets its OpInfo here, with NoCpuKernel()).
void RegisterOpsWithoutKernels(OpInfoRegistry& /*r*/) {}

constexpr std::array kOpFolders = {
    &RegisterArgMaxOpInfos,
    &RegisterBatchNormOpInfos,
    &RegisterCastOpInfos,
    &RegisterClipOpInfos,
    &RegisterConcatOpInfos,
    &RegisterConstantOpInfos,
    &RegisterConvOpInfos,
    &RegisterConvTransposeOpInfos,
    &RegisterDropoutOpInfos,
    &RegisterEinsumOpInfos,
    &RegisterElementwiseOpInfos,
    &RegisterExpandOpInfos,
    &RegisterGatherOpInfos,
    &RegisterGemmOpInfos,
    &RegisterGroupNormOpInfos,
    &RegisterIdentityOpInfos,
    &RegisterInstanceNormOpInfos,
    &RegisterLayerNormOpInfos,
    &RegisterLayoutOpInfos,
    &RegisterLossOpInfos,
    &RegisterMatMulOpInfos,
    &RegisterMinMaxOpInfos,
    &RegisterPadOpInfos,
    &RegisterPoolOpInfos,
    &RegisterRangeOpInfos,
    &RegisterReduceOpInfos,
    &RegisterReshapeOpInfos,
    &RegisterResizeOpInfos,
    &RegisterShapeOpInfos,
    &RegisterSliceOpInfos,
    &RegisterSoftmaxOpInfos,
    &RegisterSplitOpInfos,
    &RegisterSqueezeOpInfos,
    &RegisterTileOpInfos,
    &RegisterTopKOpInfos,
    &RegisterTransposeOpInfos,
    &RegisterWhereOpInfos,
    &RegisterTriluOpInfos,
    &RegisterCumSumOpInfos,
    &RegisterOneHotOpInfos,
    &RegisterRecurrentOpInfos,
    &RegisterScatterOpInfos,
    &RegisterDepthSpaceOpInfos,
    &RegisterLrnOpInfos,
    &RegisterCompressOpInfos,
    &RegisterReverseSequenceOpInfos,
    &RegisterGridSampleOpInfos,
    &RegisterControlFlowOpInfos,
    &RegisterRandomOpInfos,
    &RegisterQuantizeOpInfos,
    &RegisterDetectionOpInfos,
    &RegisterNormalizeOpInfos,
    &RegisterDetOpInfos,
    &RegisterUniqueOpInfos,
    &RegisterSpectralOpInfos,
    &RegisterTextOpInfos,
    &RegisterPreviewTrainingOpInfos,
};
static_assert(kOpFolders.size() == 57, "update this count when an op folder is added");

}  // namespace

const OpInfoRegistry& OpInfoRegistry::Global() {
  static const OpInfoRegistry* registry = [] {
    auto* r = new OpInfoRegistry();
    for (auto reg : kOpFolders) reg(*r);
    RegisterOpsWithoutKernels(*r);
    return r;
  }();
  return *registry;
}

}  // namespace onnxamp::ops
