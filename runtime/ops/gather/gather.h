// Gather and GatherElements: the per-run checks of data and indices and the output shape, shared by the CPU kernels,
// device kernels and the kernels of their gradient ops (same checks, same messages).
//
// See gather_cpu.cc for the semantics.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::ops {

// Whether the indices (input 1) are int64 (true) or int32 (false); InvalidArgument for any other type.
StatusOr<bool> IndicesAreInt64(const exec::KernelContext& ctx, const ir::Tensor& indices);

// One Gather run: the normalised axis, the output dims data[:axis] + indices + data[axis+1:], and data viewed as
// [outer, dim, inner].
struct GatherShape {
  int64_t axis = 0;
  std::vector<int64_t> out_dims;
  int64_t outer = 1;
  int64_t inner = 1;
};

// The shape of a Gather of `data` by `indices` along `axis_attr` (InvalidArgument for an axis out of range).
StatusOr<GatherShape> ResolveGather(const ir::Tensor& data, const ir::Tensor& indices, int64_t axis_attr);

// GatherGrad's dY (input 0) has Gather's output dims `shape.out_dims` for data `data_dims` and `indices`; without
// indices an empty dY of any dims passes (a backward Loop that ran no iteration stacks its slices with the dims it
// could declare; dData is zeros then).
Status CheckGatherGradDy(const exec::KernelContext& ctx, const ir::Tensor& dy, const ir::Tensor& indices,
                         const GatherShape& shape, const std::vector<int64_t>& data_dims);

// The normalised axis of a GatherElements run, after checking that `indices` has data's rank and dims no larger
// than data's off the axis (InvalidArgument).
StatusOr<int64_t> ResolveGatherElements(const exec::KernelContext& ctx, const ir::Tensor& data,
                                        const ir::Tensor& indices, int64_t axis_attr);

// The indices (input 1, int32 or int64) as int64, each made non-negative, for an axis of size `dim`: an index out of
// [-dim, dim) is an OutOfRange error naming its position and value ("index 3 (element 1 of <label> [2]) is out of
// range for axis 0 of size 3 (data [3,2])"); `label` names the indices in it.
StatusOr<std::vector<int64_t>> ReadGatherIndices(const exec::KernelContext& ctx, const ir::Tensor& indices, int64_t dim,
                                                 int64_t axis, const std::vector<int64_t>& data_dims,
                                                 std::string_view label);

// The data offset of each element of GatherElements' (and ScatterElements') indices, in row-major order of the
// indices (dims `index_dims`): its position with the axis coordinate replaced by idx[element] (non-negative), in data
// of contiguous strides `data_strides`.
std::vector<int64_t> ElementOffsets(const std::vector<int64_t>& index_dims, const std::vector<int64_t>& data_strides,
                                    int64_t axis, const std::vector<int64_t>& idx);

// The backward of a gather by offsets (GatherElementsGrad: runs of 1; GatherNDGrad: slices): dx (`dx_size`
// elements) = zeros plus each run of `run` dY elements added at offsets[i], in order (repeated offsets sum
// deterministically), summed in the compute type of `dy` and rounded once; the output type is dy's.
Status AddRunsAt(const ir::Tensor& dy, const std::vector<int64_t>& offsets, int64_t run, ir::Tensor* dx);

// One GatherND (or ScatterND: batch_dims 0) run: indices [..., m] address slices of data past its first batch_dims
// dims.
struct NdShape {
  int64_t batch_dims = 0;         // the attribute, checked
  int64_t m = 1;                  // coordinates per index tuple: indices' last dim
  int64_t batch = 1;              // batch items: the product of the first batch_dims dims
  int64_t tuples = 0;             // index tuples per batch item
  int64_t slice = 1;              // elements per addressed slice: the product of data's dims from batch_dims + m
  std::vector<int64_t> out_dims;  // GatherND's output and ScatterND's updates: indices[:-1] + data[batch_dims + m:]
  std::vector<int64_t> offsets;   // per (batch item, tuple), batch-major: the element offset of its slice in data
};

// Checks data's dims against the indices' type and dims (rank >= 1, int32/int64, the last dim m in [1, rank -
// batch_dims], the first batch_dims dims equal) without reading the indices: every field but `offsets` (left empty).
// Device kernels, which read the indices on the device, call this one.
StatusOr<NdShape> ResolveNdShape(const exec::KernelContext& ctx, const std::vector<int64_t>& data_dims,
                                 const ir::Tensor& indices, int64_t batch_dims);

// ResolveNdShape, then reads the indices (host memory): every index in [-dim, dim) (else OutOfRange naming it), and
// the slices' offsets.
StatusOr<NdShape> ResolveNd(const exec::KernelContext& ctx, const std::vector<int64_t>& data_dims,
                            const ir::Tensor& indices, int64_t batch_dims);

// GatherNDGrad(dY, indices, data_shape): data_shape (input 2, int64 dims, none negative, a size that fits in memory),
// the indices against it (ResolveNd when `read_indices`, else ResolveNdShape), and dY of GatherND's output shape.
struct NdGradShape {
  std::vector<int64_t> data_dims;
  NdShape nd;
};
StatusOr<NdGradShape> ResolveGatherNDGrad(const exec::KernelContext& ctx, int64_t batch_dims, bool read_indices);

}  // namespace onnxamp::ops
