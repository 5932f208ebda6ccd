// Registration of the tensor kernel family (CPU): shape and data-movement ops, one function per op folder.
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

void RegisterConcatKernels(exec::KernelRegistry& r);    // concat/: Concat
void RegisterConstantKernels(exec::KernelRegistry& r);  // constant/: Constant, ConstantOfShape
void RegisterExpandKernels(exec::KernelRegistry& r);    // expand/: Expand
void RegisterGatherKernels(exec::KernelRegistry& r);    // gather/: Gather, GatherElements
void RegisterScatterKernels(exec::KernelRegistry& r);   // scatter/: ScatterElements, Scatter, ScatterND
// scatter/gather_nd_cpu.cc: GatherND, com.onnxamp GatherNDGrad
void RegisterGatherNDKernels(exec::KernelRegistry& r);
void RegisterPadKernels(exec::KernelRegistry& r);         // pad/: Pad
void RegisterRangeKernels(exec::KernelRegistry& r);       // range/: Range
void RegisterReshapeKernels(exec::KernelRegistry& r);     // reshape/: Reshape, Flatten
void RegisterResizeKernels(exec::KernelRegistry& r);      // resize/: Resize, Upsample
void RegisterResizeGradKernels(exec::KernelRegistry& r);  // resize/resize_grad_cpu.cc: com.onnxamp ResizeGrad
void RegisterShapeKernels(exec::KernelRegistry& r);       // shape/: Shape, Size
void RegisterSliceKernels(exec::KernelRegistry& r);       // slice/: Slice
void RegisterSplitKernels(exec::KernelRegistry& r);       // split/: Split
void RegisterSqueezeKernels(exec::KernelRegistry& r);     // squeeze/: Squeeze, Unsqueeze
void RegisterTileKernels(exec::KernelRegistry& r);        // tile/: Tile
void RegisterTriluKernels(exec::KernelRegistry& r);       // trilu/: Trilu
void RegisterCumSumKernels(exec::KernelRegistry& r);      // cumsum/: CumSum
void RegisterOneHotKernels(exec::KernelRegistry& r);      // one_hot/: OneHot
void RegisterTransposeKernels(exec::KernelRegistry& r);   // transpose/: Transpose
// depth_space/: DepthToSpace, SpaceToDepth, com.onnxamp DepthToSpaceGrad
void RegisterDepthSpaceKernels(exec::KernelRegistry& r);
void RegisterCompressKernels(exec::KernelRegistry& r);         // compress/: NonZero, Compress, EyeLike
void RegisterReverseSequenceKernels(exec::KernelRegistry& r);  // reverse_sequence/
// grid_sample/: GridSample, com.onnxamp GridSampleGrad
void RegisterGridSampleKernels(exec::KernelRegistry& r);
void RegisterGatherGradKernels(exec::KernelRegistry& r);  // gather/: com.onnxamp GatherGrad, GatherElementsGrad
void RegisterSliceGradKernels(exec::KernelRegistry& r);   // slice/: com.onnxamp SliceGrad
void RegisterPadGradKernels(exec::KernelRegistry& r);     // pad/: com.onnxamp PadGrad
// random/: RandomUniform, RandomNormal, their *Like forms, Bernoulli, Multinomial
void RegisterRandomKernels(exec::KernelRegistry& r);
// quantize/: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear
void RegisterQuantizeKernels(exec::KernelRegistry& r);
// detection/: NonMaxSuppression, RoiAlign, com.onnxamp RoiAlignGrad
void RegisterNonMaxSuppressionKernels(exec::KernelRegistry& r);
void RegisterRoiAlignKernels(exec::KernelRegistry& r);
// normalize/: MeanVarianceNormalization, LpNormalization and their com.onnxamp gradients
void RegisterNormalizeKernels(exec::KernelRegistry& r);
// quantize/qlinear_cpu.cc: MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv
void RegisterQLinearKernels(exec::KernelRegistry& r);
void RegisterUniqueKernels(exec::KernelRegistry& r);  // unique/: Unique
void RegisterDetKernels(exec::KernelRegistry& r);     // det/: Det, com.onnxamp DetGrad
// spectral/: DFT, STFT, the windows, MelWeightMatrix, com.onnxamp DFTGrad and STFTGrad
void RegisterSpectralKernels(exec::KernelRegistry& r);
// text/: StringNormalizer, TfIdfVectorizer
void RegisterStringNormalizerKernels(exec::KernelRegistry& r);
void RegisterTfIdfVectorizerKernels(exec::KernelRegistry& r);
// preview_training/: ai.onnx.preview.training Adagrad, Momentum, Adam
void RegisterPreviewTrainingKernels(exec::KernelRegistry& r);

void RegisterTensorKernels(exec::KernelRegistry& r) {
  RegisterConcatKernels(r);
  RegisterConstantKernels(r);
  RegisterExpandKernels(r);
  RegisterGatherKernels(r);
  RegisterScatterKernels(r);
  RegisterGatherNDKernels(r);
  RegisterPadKernels(r);
  RegisterRangeKernels(r);
  RegisterReshapeKernels(r);
  RegisterResizeKernels(r);
  RegisterResizeGradKernels(r);
  RegisterShapeKernels(r);
  RegisterSliceKernels(r);
  RegisterSplitKernels(r);
  RegisterSqueezeKernels(r);
  RegisterTileKernels(r);
  RegisterTriluKernels(r);
  RegisterCumSumKernels(r);
  RegisterOneHotKernels(r);
  RegisterTransposeKernels(r);
  RegisterDepthSpaceKernels(r);
  RegisterCompressKernels(r);
  RegisterReverseSequenceKernels(r);
  RegisterGridSampleKernels(r);
  RegisterGatherGradKernels(r);
  RegisterSliceGradKernels(r);
  RegisterPadGradKernels(r);
  RegisterRandomKernels(r);
  RegisterQuantizeKernels(r);
  RegisterNonMaxSuppressionKernels(r);
  RegisterRoiAlignKernels(r);
  RegisterNormalizeKernels(r);
  RegisterQLinearKernels(r);
  RegisterUniqueKernels(r);
  RegisterDetKernels(r);
  RegisterSpectralKernels(r);
  RegisterStringNormalizerKernels(r);
  RegisterTfIdfVectorizerKernels(r);
  RegisterPreviewTrainingKernels(r);
}

}  // namespace onnxamp::ops
