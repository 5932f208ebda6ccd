// Test helpers for the data-movement kernels (Reshape, Transpose, Concat, Slice, Gather, Pad, ...): tensors of
// any element type whose elements encode their own index, so that one expectation ("output element j is input
// element src[j]") checks an op on every dtype, and small builders for int64 inputs.
#pragma once

#include <gtest/gtest.h>

#include <complex>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/ir/tensor.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "tests/runtime/op_tester.h"

namespace onnxamp::testing {

// The element types data-movement ops are tested on: every element size, plus bool and string.
inline std::vector<DType> MovableDTypes() {
  return {DType::kFloat32, DType::kFloat16,   DType::kBFloat16,   DType::kFloat64, DType::kInt8,
          DType::kUint8,   DType::kInt16,     DType::kInt32,      DType::kInt64,   DType::kUint64,
          DType::kBool,    DType::kComplex64, DType::kComplex128, DType::kString};
}

// A readable test-name suffix for a dtype ("float16", "complex128", ...).
inline std::string DTypeTestName(const ::testing::TestParamInfo<DType>& info) {
  return std::string(DTypeName(info.param));
}

// Writes the code of index i into element i of `t`: i (mod 120, exact in every type) for numbers, i % 2 for
// bool, "s<i>" for strings, (i, -i) for complex.
inline void EncodeElement(ir::Tensor& t, int64_t i, int64_t code_index) {
  const int64_t v = code_index % 120;
  switch (t.dtype()) {
    case DType::kString:
      t.mutable_strings()[i] = "s" + std::to_string(code_index);
      return;
    case DType::kBool:
      t.mutable_values<bool>()[i] = code_index % 2 != 0;
      return;
    case DType::kComplex64:
      t.mutable_values<std::complex<float>>()[i] = {static_cast<float>(v), static_cast<float>(-v)};
      return;
    case DType::kComplex128:
      t.mutable_values<std::complex<double>>()[i] = {static_cast<double>(v), static_cast<double>(-v)};
      return;
    default:
      break;
  }
  Status st = ops::DispatchNumeric(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    t.mutable_values<T>()[i] = ops::Store<T>(static_cast<ops::ComputeType<T>>(v));
    return Status::Ok();
  });
  ASSERT_TRUE(st.ok()) << st.message();
}

// A tensor whose element i encodes i.
inline ir::Tensor IotaTensor(DType dtype, std::vector<int64_t> dims) {
  ir::Tensor t(dtype, std::move(dims));
  for (int64_t i = 0; i < t.num_elements(); ++i) EncodeElement(t, i, i);
  return t;
}

// Expects `got` to have dtype, `dims`, and element j equal to the code of src[j] (as IotaTensor writes it); a
// negative src[j] means element j must equal element 0 of `fill`.
inline void ExpectGathered(const ir::Tensor& got, DType dtype, const std::vector<int64_t>& dims,
                           const std::vector<int64_t>& src, const ir::Tensor* fill = nullptr,
                           const std::string& what = "") {
  ASSERT_EQ(got.dtype(), dtype) << what;
  ASSERT_EQ(got.dims(), dims) << what;
  ir::Tensor want(dtype, dims);
  ASSERT_EQ(want.num_elements(), static_cast<int64_t>(src.size())) << what;
  const size_t elem = dtype == DType::kString ? 0 : static_cast<size_t>(DTypeBits(dtype) / 8);
  for (size_t j = 0; j < src.size(); ++j) {
    if (src[j] >= 0) {
      EncodeElement(want, static_cast<int64_t>(j), src[j]);
    } else if (dtype == DType::kString) {
      want.mutable_strings()[j] = fill->strings()[0];
    } else {
      std::memcpy(want.mutable_data() + j * elem, fill->data(), elem);
    }
  }
  EXPECT_TRUE(got.SameContents(want)) << what << ": output differs from the expected gather for " << DTypeName(dtype);
}

// A one-node tester for `op_type` at `opset` with `num_outputs` outputs.
inline OpTester Op(std::string op_type, int64_t opset, int num_outputs = 1) {
  OpTester t;
  t.op_type = std::move(op_type);
  t.opset = opset;
  t.num_outputs = num_outputs;
  return t;
}

// An int64 tensor of rank 1 (or a scalar when `scalar`).
inline ir::Tensor Int64s(const std::vector<int64_t>& v, bool scalar = false) {
  ir::Tensor t(DType::kInt64, scalar ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.mutable_values<int64_t>()[i] = v[i];
  return t;
}

// An int32 tensor of rank 1.
inline ir::Tensor Int32s(const std::vector<int32_t>& v) {
  ir::Tensor t(DType::kInt32, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.mutable_values<int32_t>()[i] = v[i];
  return t;
}

// The int64 values of a tensor.
inline std::vector<int64_t> Int64Values(const ir::Tensor& t) {
  auto v = t.values<int64_t>();
  return {v.begin(), v.end()};
}

// Runs `tester` and expects failure whose message contains `fragment`.
inline void ExpectRunError(const OpTester& tester, const std::string& fragment) {
  auto out = tester.Run();
  ASSERT_FALSE(out.ok()) << "expected an error containing: " << fragment;
  EXPECT_NE(out.status().message().find(fragment), std::string::npos) << out.status().message();
}

}  // namespace onnxamp::testing
