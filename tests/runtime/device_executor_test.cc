// The executor on a device, tested here without a GPU: a stand-in backend registered for Device::kCuda whose
// "device memory" is host memory tagged MemoryKind::kCuda, and whose kernels check where each input lives.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/executor/device_context.h"
#include "runtime/executor/session.h"
#include "tests/runtime/ir_build_util.h"
#include "tests/runtime/op_tester.h"

namespace onnxamp::exec {
namespace {

using testing::Input;
using testing::Named;

// Host memory posing as device memory, with a cache like the real allocator's, counting what the executor does.
class FakeDeviceContext : public DeviceContext {
 public:
  ~FakeDeviceContext() override {
    for (auto& [size, ptr] : state_->cache) std::free(ptr);
    state_->cache.clear();
  }
  Device device() const override { return Device::kCuda; }
  std::string Describe() const override { return "fake:0"; }

  StatusOr<std::shared_ptr<ir::Buffer>> Allocate(size_t bytes) override {
    if (fail_allocations) return ResourceExhausted("fake device is full");
    const size_t block = bytes == 0 ? 0 : (bytes + 255) / 256 * 256;
    void* ptr = nullptr;
    auto it = state_->cache.find(block);
    if (it != state_->cache.end()) {
      ptr = it->second;
      state_->cache.erase(it);
    } else {
      ptr = block ? std::aligned_alloc(256, block) : nullptr;
      ++stats_.device_allocations;
    }
    stats_.in_use_bytes += block;
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.in_use_bytes);
    std::shared_ptr<State> state = state_;
    DeviceMemoryStats* stats = &stats_;
    std::shared_ptr<void> owner(ptr, [state, block, stats, alive = alive_](void* p) {
      if (!*alive) {
        std::free(p);
        return;
      }
      stats->in_use_bytes -= block;
      if (p) state->cache.emplace(block, p);
    });
    return std::make_shared<ir::Buffer>(static_cast<std::byte*>(ptr), bytes, std::move(owner), ir::MemoryKind::kCuda);
  }
  Status CopyHostToDevice(const void* src, void* dst, size_t bytes) override {
    ++host_to_device;
    if (bytes) std::memcpy(dst, src, bytes);
    return Status::Ok();
  }
  Status CopyDeviceToDevice(const void* src, void* dst, size_t bytes) override {
    ++device_to_device;
    if (bytes) std::memcpy(dst, src, bytes);
    return Status::Ok();
  }
  Status CopyDeviceToHost(const void* src, void* dst, size_t bytes) override {
    ++device_to_host;
    if (bytes) std::memcpy(dst, src, bytes);
    return Status::Ok();
  }
  Status Synchronize() override {
    ++synchronizations;
    Status st = pending_error;
    pending_error = Status::Ok();
    return st;
  }
  Status BeginTiming() override { return Status::Ok(); }
  StatusOr<double> EndTiming() override { return 0.25; }
  // Profile marks: mark i "happens" at time i ms, so each recorded interval is 1 ms.
  Status BeginProfile(size_t marks) override {
    marked.assign(marks, false);
    return Status::Ok();
  }
  Status Mark(size_t i) override {
    if (i >= marked.size()) return Internal("mark ", i, " out of range");
    marked[i] = true;
    return Status::Ok();
  }
  StatusOr<std::vector<double>> EndProfile() override {
    ++synchronizations;
    std::vector<double> s(marked.empty() ? 0 : marked.size() - 1, 0.0);
    for (size_t i = 0; i < s.size(); ++i) s[i] = marked[i] && marked[i + 1] ? 1e-3 : 0;
    return s;
  }
  StatusOr<std::shared_ptr<ir::Buffer>> AllocateHost(size_t bytes) override {
    ++host_allocations;
    return DeviceContext::AllocateHost(bytes);
  }
  DeviceMemoryStats memory_stats() const override { return stats_; }
  void ResetPeak() override { stats_.peak_bytes = stats_.in_use_bytes; }

  int host_to_device = 0, device_to_device = 0, device_to_host = 0, synchronizations = 0, host_allocations = 0;
  std::vector<bool> marked;
  bool fail_allocations = false;
  Status pending_error;  // an "asynchronous" kernel error, reported by the next Synchronize

 private:
  struct State {
    std::multimap<size_t, void*> cache;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
  // Buffers that outlive the context free their memory instead of caching it.
  std::shared_ptr<bool> alive_ = std::shared_ptr<bool>(new bool(true), [](bool* b) { delete b; });
  DeviceMemoryStats stats_;

 public:
  void Orphan() { *alive_ = false; }
};

FakeDeviceContext* g_context = nullptr;  // the context of the session created last
int g_kernel_runs = 0;

Status ExpectOn(const KernelContext& ctx, size_t i, bool device) {
  const ir::Tensor* t = ctx.input(i);
  if (t && t->on_host() == device) {
    return Internal("input ", i, " expected on ", device ? "the device" : "the host");
  }
  return Status::Ok();
}

// Elementwise float kernels on "device" memory (host bytes): y = f(a) or f(a, b) with b of a's size or one element.
template <int kArity>
class FakeElementwise : public OpKernel {
 public:
  FakeElementwise(const KernelInfo& info, Status* st) : op_(info.node.op_type()) {}
  Status Compute(KernelContext& ctx) const override {
    ++g_kernel_runs;
    if (ctx.device_context() == nullptr) return Internal("no device context");
    for (size_t i = 0; i < kArity; ++i) ONNXAMP_RETURN_IF_ERROR(ExpectOn(ctx, i, /*device=*/true));
    const ir::Tensor& a = *ctx.input(0);
    if (a.dtype() != DType::kFloat32) return Unimplemented("fake ", op_, " takes float only");
    if (op_ == "Neg") return InvalidArgument("fake device failure");
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, a.dtype(), a.dims()));
    if (y->on_host()) return Internal("output allocated on the host");
    const float* x = reinterpret_cast<const float*>(a.data());
    float* out = reinterpret_cast<float*>(const_cast<std::byte*>(y->data()));
    const float* b = kArity == 2 ? reinterpret_cast<const float*>(ctx.input(1)->data()) : nullptr;
    const int64_t nb = kArity == 2 ? ctx.input(1)->num_elements() : 0;
    for (int64_t i = 0; i < a.num_elements(); ++i) {
      if (op_ == "Relu") out[i] = x[i] > 0 ? x[i] : 0;
      if (op_ == "Sqrt") out[i] = x[i];
      if (op_ == "Add") out[i] = x[i] + b[nb == 1 ? 0 : i];
      if (op_ == "Mul") out[i] = x[i] * b[nb == 1 ? 0 : i];
    }
    if (op_ == "Sqrt") static_cast<FakeDeviceContext*>(ctx.device_context())->pending_error = Internal("fake fault");
    return Status::Ok();
  }

 private:
  std::string op_;
};

// Reshape with the shape read on the host; the output aliases the input's device buffer.
class FakeReshape : public OpKernel {
 public:
  FakeReshape(const KernelInfo& info, Status* st) {}
  Status Compute(KernelContext& ctx) const override {
    ++g_kernel_runs;
    ONNXAMP_RETURN_IF_ERROR(ExpectOn(ctx, 0, /*device=*/true));
    ONNXAMP_RETURN_IF_ERROR(ExpectOn(ctx, 1, /*device=*/false));
    const ir::Tensor& data = *ctx.input(0);
    std::vector<int64_t> dims(ctx.input(1)->values<int64_t>().begin(), ctx.input(1)->values<int64_t>().end());
    int64_t known = 1, infer = -1;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] == -1)
        infer = static_cast<int64_t>(i);
      else
        known *= dims[i];
    }
    if (infer >= 0) dims[infer] = data.num_elements() / known;
    return ctx.SetOutput(0, ir::Tensor::FromBuffer(data.dtype(), dims, data.buffer()));
  }
};

// Shape: reads no data, gives a host tensor.
class FakeShape : public OpKernel {
 public:
  FakeShape(const KernelInfo& info, Status* st) {}
  Status Compute(KernelContext& ctx) const override {
    ++g_kernel_runs;
    ONNXAMP_RETURN_IF_ERROR(ExpectOn(ctx, 0, /*device=*/true));
    const std::vector<int64_t>& d = ctx.input(0)->dims();
    ir::Tensor out(DType::kInt64, {static_cast<int64_t>(d.size())});
    std::memcpy(out.mutable_data(), d.data(), d.size() * sizeof(int64_t));
    return ctx.SetOutput(0, std::move(out));
  }
};

// A device kernel for Gather that only takes floats: int64 shape arithmetic must stay on the host.
class FakeGather : public OpKernel {
 public:
  FakeGather(const KernelInfo& info, Status* st) {}
  Status Compute(KernelContext& ctx) const override { return Internal("fake Gather must not run on the device"); }
};

// A device kernel whose factory refuses an attribute the way a real kernel does.
class FakeSoftmax : public OpKernel {
 public:
  FakeSoftmax(const KernelInfo& info, Status* st) {
    if (info.node.GetInt("axis", -1) == 7) *st = InvalidArgument("axis 7 is out of range");
    if (info.node.GetInt("axis", -1) == 0) *st = Unimplemented("axis 0 only on the CPU");
  }
  Status Compute(KernelContext& ctx) const override { return Internal("fake Softmax does not compute"); }
};

const KernelRegistry& FakeKernels() {
  static const KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    const std::vector<DType> f32 = {DType::kFloat32};
    for (const char* op : {"Relu", "Sqrt", "Neg"}) {
      r->Register({op, "", 1, 100, Device::kCuda, f32, 0, &MakeKernel<FakeElementwise<1>>});
    }
    for (const char* op : {"Add", "Mul"}) {
      r->Register({op, "", 1, 100, Device::kCuda, f32, 0, &MakeKernel<FakeElementwise<2>>});
    }
    r->Register({"Reshape", "", 5, 100, Device::kCuda, {}, 0, &MakeKernel<FakeReshape>, {1}});
    r->Register({"Shape", "", 1, 100, Device::kCuda, {}, 0, &MakeKernel<FakeShape>, {}, true});
    r->Register({"Gather", "", 1, 100, Device::kCuda, {}, 0, &MakeKernel<FakeGather>});
    r->Register({"Softmax", "", 1, 100, Device::kCuda, f32, 0, &MakeKernel<FakeSoftmax>});
    return r;
  }();
  return *registry;
}

StatusOr<std::unique_ptr<DeviceContext>> CreateFakeContext(const SessionOptions& options) {
  auto ctx = std::make_unique<FakeDeviceContext>();
  g_context = ctx.get();
  return std::unique_ptr<DeviceContext>(std::move(ctx));
}

class DeviceExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const DeviceBackend* existing = FindDeviceBackend(Device::kCuda);
    if (existing) saved_ = *existing;
    DeviceBackend fake;
    fake.device = Device::kCuda;
    fake.kernels = &FakeKernels();
    fake.create_context = &CreateFakeContext;
    RegisterDeviceBackend(fake);
    g_context = nullptr;
    g_kernel_runs = 0;
  }
  void TearDown() override {
    if (saved_) {
      RegisterDeviceBackend(*saved_);
    } else {
      UnregisterDeviceBackend(Device::kCuda);
    }
  }

  static SessionOptions Options() {
    SessionOptions o;
    o.device = Device::kCuda;
    o.num_threads = 1;
    return o;
  }

 private:
  std::optional<DeviceBackend> saved_;
};

ir::Value* Initializer(ir::Graph& g, const std::string& name, ir::Tensor t) {
  ir::Value* v = g.CreateValue(name);
  v->set_type(ir::ValueType::Tensor(t.dtype()));
  g.SetInitializer(v, std::move(t));
  return v;
}

ir::Tensor Floats(std::vector<int64_t> dims, std::vector<float> v) { return testing::MakeTensor<float>(dims, v); }

// x -> Relu (device) -> Sigmoid (no device kernel: CPU) -> Relu (device) -> y
ir::Model FallbackModel() {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", DType::kFloat32, {2, 3});
  ir::Value* a = g.CreateValue("a");
  ir::Value* b = g.CreateValue("b");
  ir::Value* y = g.CreateValue("y");
  g.AddNode("Relu", {x}, {a}, "r1");
  g.AddNode("Sigmoid", {a}, {b}, "s");
  g.AddNode("Relu", {b}, {y}, "r2");
  g.AddOutput(y);
  return m;
}

TEST_F(DeviceExecutorTest, OpsWithoutADeviceKernelFallBackToTheCpu) {
  auto session = Session::Create(FallbackModel(), Options());
  ASSERT_TRUE(session.ok()) << session.status().message();
  const Placement& p = (*session)->placement();
  EXPECT_EQ(p.device, Device::kCuda);
  EXPECT_EQ(p.nodes, 3);
  EXPECT_EQ(p.on_cpu, (std::vector<std::string>{"Sigmoid 's'"}));
  EXPECT_EQ((*session)->DescribePlacement(), "fake:0; 1 of 3 nodes on the CPU (Sigmoid 's')");
  RunStats stats;
  auto out = (*session)->Run({Named(Floats({2, 3}, {-1, 0, 1, 2, -3, 4}), "x")}, &stats);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_TRUE((*out)[0].on_host());
  EXPECT_EQ((*out)[0].name(), "y");
  const std::vector<float> got = testing::Values<float>((*out)[0]);
  const std::vector<float> want = {
      0.5f, 0.5f, 1 / (1 + std::exp(-1.f)), 1 / (1 + std::exp(-2.f)), 0.5f, 1 / (1 + std::exp(-4.f))};
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  // x up, a down (for Sigmoid), b up, y down: 24 bytes each way twice.
  EXPECT_EQ(stats.host_to_device_bytes, 48u);
  EXPECT_EQ(stats.device_to_host_bytes, 48u);
  EXPECT_EQ(g_kernel_runs, 2);
}

TEST_F(DeviceExecutorTest, CopiesEachValueAtMostOncePerRun) {
  // x feeds two device Relus and two CPU Sigmoids; the device value a feeds two CPU Sigmoids.
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", DType::kFloat32, {4});
  std::vector<ir::Value*> outs;
  auto node = [&](const char* op, ir::Value* in, const std::string& name) {
    ir::Value* v = g.CreateValue(name + "_out");
    g.AddNode(op, {in}, {v}, name);
    return v;
  };
  ir::Value* a = node("Relu", x, "r1");
  outs.push_back(node("Relu", x, "r2"));
  outs.push_back(node("Sigmoid", x, "s1"));
  outs.push_back(node("Sigmoid", x, "s2"));
  outs.push_back(node("Sigmoid", a, "s3"));
  outs.push_back(node("Sigmoid", a, "s4"));
  for (ir::Value* v : outs) g.AddOutput(v);
  auto session = std::move(Session::Create(std::move(m), Options())).value();
  RunStats stats;
  auto out = session->Run({Named(Floats({4}, {-1, 1, -2, 2}), "x")}, &stats);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(stats.host_to_device_bytes, 16u);        // x, once
  EXPECT_EQ(stats.device_to_host_bytes, 16u + 16u);  // a once, and the output of r2
  EXPECT_EQ(g_context->host_to_device, 1);
  EXPECT_EQ(g_context->device_to_host, 2);
  for (const ir::Tensor& t : *out) EXPECT_TRUE(t.on_host());
  EXPECT_EQ(testing::Values<float>((*out)[0]), (std::vector<float>{0, 1, 0, 2}));
}

// Reshape's shape input is read on the host, whether it is a graph input, a constant, or a shape computed on the host.
TEST_F(DeviceExecutorTest, HostInputsAreDeliveredOnTheHost) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", DType::kFloat32, {2, 3});
  ir::Value* shape_in = Input(g, "shape", DType::kInt64, {2});
  ir::Value* shape_c = Initializer(g, "shape_c", testing::MakeTensor<int64_t>({1}, {-1}));
  ir::Value* r = g.CreateValue("r");
  ir::Value* y1 = g.CreateValue("y1");
  ir::Value* y2 = g.CreateValue("y2");
  g.AddNode("Relu", {x}, {r}, "relu");
  g.AddNode("Reshape", {r, shape_in}, {y1}, "reshape1");
  g.AddNode("Reshape", {r, shape_c}, {y2}, "reshape2");
  g.AddOutput(y1);
  g.AddOutput(y2);
  auto session = std::move(Session::Create(std::move(m), Options())).value();
  EXPECT_TRUE(session->placement().on_cpu.empty()) << session->DescribePlacement();
  auto out = session->Run(
      {Named(Floats({2, 3}, {1, -2, 3, -4, 5, -6}), "x"), Named(testing::MakeTensor<int64_t>({2}, {3, 2}), "shape")});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ((*out)[1].dims(), (std::vector<int64_t>{6}));
  EXPECT_EQ(testing::Values<float>((*out)[1]), (std::vector<float>{1, 0, 3, 0, 5, 0}));
}

// x -> Shape (device, host output) -> Gather(., 0) -> Concat(., [-1]) -> Reshape(x, .): Gather and Concat have no
// declared types, compute on int64, and only feed Reshape's host input, so they run on the host even though Gather has
// a device kernel.
TEST_F(DeviceExecutorTest, ShapeSubgraphsStayOnTheHost) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", DType::kFloat32, {2, 3, 2});
  ir::Value* idx = Initializer(g, "idx", testing::MakeTensor<int64_t>({1}, {0}));
  ir::Value* minus1 = Initializer(g, "minus1", testing::MakeTensor<int64_t>({1}, {-1}));
  ir::Value* shape = g.CreateValue("shape");
  ir::Value* first = g.CreateValue("first");
  ir::Value* target = g.CreateValue("target");
  ir::Value* y = g.CreateValue("y");
  g.AddNode("Shape", {x}, {shape}, "shape");
  g.AddNode("Gather", {shape, idx}, {first}, "gather");
  ir::Node* concat = g.AddNode("Concat", {first, minus1}, {target}, "concat");
  concat->SetAttribute(ir::Attribute::Int("axis", 0));
  g.AddNode("Reshape", {x, target}, {y}, "reshape");
  g.AddOutput(y);
  auto session = Session::Create(std::move(m), Options());
  ASSERT_TRUE(session.ok()) << session.status().message();
  EXPECT_EQ((*session)->placement().on_cpu, (std::vector<std::string>{"Gather 'gather'", "Concat 'concat'"}));
  RunStats stats;
  auto out = (*session)->Run({Named(Floats({2, 3, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}), "x")}, &stats);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(stats.host_to_device_bytes, 48u);  // x only: the shape values never go to the device
}

// A shape-like value that a device kernel reads on the device stays there: Gather keeps its device kernel.
TEST_F(DeviceExecutorTest, IntegerNodesFeedingDeviceInputsStayOnTheDevice) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", DType::kFloat32, {3});
  ir::Value* idx = Initializer(g, "idx", testing::MakeTensor<int64_t>({1}, {0}));
  ir::Value* shape = g.CreateValue("shape");
  ir::Value* first = g.CreateValue("first");
  g.AddNode("Shape", {x}, {shape}, "shape");
  g.AddNode("Gather", {shape, idx}, {first}, "gather");
  ir::Value* y = g.CreateValue("y");
  g.AddNode("Mul", {x, first}, {y}, "mul");  // float output: stays on the device, and reads `first` there
  g.AddOutput(y);
  auto session = std::move(Session::Create(std::move(m), Options())).value();
  EXPECT_TRUE(session->placement().on_cpu.empty()) << session->DescribePlacement();
}

// An integer computation whose inputs are on the host and whose result is only a graph output runs on the host too.
TEST_F(DeviceExecutorTest, HostIntegerResultsStayOnTheHost) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", DType::kFloat32, {3, 4});
  ir::Value* idx = Initializer(g, "idx", testing::MakeTensor<int64_t>({1}, {1}));
  ir::Value* shape = g.CreateValue("shape");
  ir::Value* second = g.CreateValue("second");
  g.AddNode("Shape", {x}, {shape}, "shape");
  g.AddNode("Gather", {shape, idx}, {second}, "gather");
  g.AddOutput(second);
  auto session = std::move(Session::Create(std::move(m), Options())).value();
  EXPECT_EQ(session->placement().on_cpu, (std::vector<std::string>{"Gather 'gather'"}));
  RunStats stats;
  auto out = session->Run({Named(Floats({3, 4}, std::vector<float>(12, 1)), "x")}, &stats);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(testing::Values<int64_t>((*out)[0]), (std::vector<int64_t>{4}));
  EXPECT_EQ(stats.device_to_host_bytes, 0u);
}

// W^T is computed once at Create (Transpose has no device kernel, yet no CPU node remains) and uploaded once.
TEST_F(DeviceExecutorTest, ConstantSubgraphsAreFoldedAtCreate) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", DType::kFloat32, {3, 2});
  ir::Value* w = Initializer(g, "w", Floats({2, 3}, {1, 2, 3, 4, 5, 6}));
  ir::Value* wt = g.CreateValue("wt");
  ir::Value* y = g.CreateValue("y");
  g.AddNode("Transpose", {w}, {wt}, "t");
  g.AddNode("Add", {x, wt}, {y}, "add");
  g.AddOutput(y);
  auto session = Session::Create(std::move(m), Options());
  ASSERT_TRUE(session.ok()) << session.status().message();
  EXPECT_EQ((*session)->placement().nodes, 1);
  EXPECT_TRUE((*session)->placement().on_cpu.empty()) << (*session)->DescribePlacement();
  EXPECT_EQ(g_context->host_to_device, 1);  // wt, uploaded at Create
  for (int run = 0; run < 2; ++run) {
    RunStats stats;
    auto out = (*session)->Run({Named(Floats({3, 2}, {0, 0, 0, 0, 0, 10}), "x")}, &stats);
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ(testing::Values<float>((*out)[0]), (std::vector<float>{1, 4, 2, 5, 3, 16}));
    EXPECT_EQ(stats.host_to_device_bytes, 24u) << "run " << run;  // x only
  }
  EXPECT_EQ(g_context->host_to_device, 3);
}

// An initializer the caller may override is not folded, nor is Dropout (training mode may be switched on).
TEST_F(DeviceExecutorTest, OverridableAndRandomValuesAreNotFolded) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* w = Input(g, "w", DType::kFloat32, {2, 3});
  g.SetInitializer(w, Floats({2, 3}, {1, 2, 3, 4, 5, 6}));
  ir::Value* wt = g.CreateValue("wt");
  g.AddNode("Transpose", {w}, {wt}, "t");
  ir::Value* c = Initializer(g, "c", Floats({2}, {1, 2}));
  ir::Value* d = g.CreateValue("d");
  g.AddNode("Dropout", {c}, {d}, "drop");
  g.AddOutput(wt);
  g.AddOutput(d);
  auto session = Session::Create(std::move(m), Options());
  ASSERT_TRUE(session.ok()) << session.status().message();
  EXPECT_EQ((*session)->placement().on_cpu, (std::vector<std::string>{"Transpose 't'", "Dropout 'drop'"}));
  auto out = (*session)->Run({Named(Floats({2, 3}, {0, 1, 2, 3, 4, 5}), "w")});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(testing::Values<float>((*out)[0]), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(testing::Values<float>((*out)[1]), (std::vector<float>{1, 2}));
}

// x -> Relu -> Relu -> Relu -> y: the second run with the same shapes takes every intermediate from the plan's device
// arena, and inputs and outputs from the allocator's cache: no device allocation at all.
TEST_F(DeviceExecutorTest, SteadyStateRunsMakeNoDeviceAllocation) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* v = Input(g, "x", DType::kFloat32, {64});
  for (int i = 0; i < 3; ++i) {
    ir::Value* next = g.CreateValue(StrCat("v", i));
    g.AddNode("Relu", {v}, {next}, StrCat("relu", i));
    v = next;
  }
  g.AddOutput(v);
  auto session = std::move(Session::Create(std::move(m), Options())).value();
  std::vector<float> xs(64);
  for (int i = 0; i < 64; ++i) xs[i] = static_cast<float>(i % 2 ? i : -i);
  const ir::Tensor x = Named(Floats({64}, xs), "x");
  RunStats first, second, third;
  ASSERT_TRUE(session->Run({x}, &first).ok());
  EXPECT_FALSE(first.planned);
  EXPECT_GT(first.device_allocations, 0u);
  const uint64_t allocations = g_context->memory_stats().device_allocations;
  auto out = session->Run({x}, &second);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_TRUE(second.planned);
  EXPECT_EQ(second.unplanned_values, 0);
  EXPECT_EQ(second.device_allocations, 0u);
  EXPECT_EQ(g_context->memory_stats().device_allocations, allocations);
  EXPECT_GE(second.arena_bytes, 2u * 256u);  // two intermediates alive at once in the device arena
  EXPECT_GT(second.device_peak_bytes, 0u);
  ASSERT_TRUE(session->Run({x}, &third).ok());
  EXPECT_EQ(third.device_allocations, 0u);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(testing::Values<float>((*out)[0])[i], i % 2 ? i : 0) << i;
  EXPECT_TRUE(third.planned);
}

// Reshape passes its input's buffer through. From a heap value it is shared; from the plan's arena it is copied on
// the device (a later value may reuse the region), never through the host.
TEST_F(DeviceExecutorTest, PassThroughOutputsStayOnTheDevice) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", DType::kFloat32, {2, 2});
  ir::Value* shape = Initializer(g, "shape", testing::MakeTensor<int64_t>({1}, {4}));
  ir::Value* a = g.CreateValue("a");
  ir::Value* b = g.CreateValue("b");
  ir::Value* c = g.CreateValue("c");
  ir::Value* y = g.CreateValue("y");
  g.AddNode("Relu", {x}, {a}, "r1");
  g.AddNode("Reshape", {a, shape}, {b}, "reshape");
  g.AddNode("Relu", {b}, {c}, "r2");
  g.AddNode("Add", {c, b}, {y}, "add");
  g.AddOutput(y);
  auto session = std::move(Session::Create(std::move(m), Options())).value();
  const ir::Tensor x_in = Named(Floats({2, 2}, {1, -2, 3, -4}), "x");
  for (int run = 0; run < 3; ++run) {
    RunStats stats;
    auto out = session->Run({x_in}, &stats);
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ(testing::Values<float>((*out)[0]), (std::vector<float>{2, 0, 6, 0})) << run;
    EXPECT_EQ(stats.device_to_host_bytes, 16u) << run;  // y only
  }
  EXPECT_EQ(g_context->device_to_device, 2);  // planned runs 2 and 3 copy `a`'s arena region for `b`
}

TEST_F(DeviceExecutorTest, KernelErrorsNameTheNode) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", DType::kFloat32, {2});
  ir::Value* y = g.CreateValue("y");
  g.AddNode("Neg", {x}, {y}, "negate");
  g.AddOutput(y);
  auto session = std::move(Session::Create(std::move(m), Options())).value();
  auto out = session->Run({Named(Floats({2}, {1, 2}), "x")});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "node Neg 'negate': fake device failure");
}

TEST_F(DeviceExecutorTest, AsynchronousErrorsSurfaceAtTheEndOfTheRun) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", DType::kFloat32, {2});
  ir::Value* y = g.CreateValue("y");
  g.AddNode("Sqrt", {x}, {y}, "root");
  g.AddOutput(y);
  auto session = std::move(Session::Create(std::move(m), Options())).value();
  auto out = session->Run({Named(Floats({2}, {1, 2}), "x")});
  ASSERT_FALSE(out.ok());
  // The output copy synchronises first and reports it, naming the output.
  EXPECT_NE(out.status().message().find("fake fault"), std::string::npos) << out.status().message();
  // The next run is clean again.
  g_kernel_runs = 0;
  auto again = session->Run({Named(Floats({2}, {1, 2}), "x")});
  EXPECT_FALSE(again.ok());
  EXPECT_EQ(g_kernel_runs, 1);
}

TEST_F(DeviceExecutorTest, DeviceAttributeErrorsAreRefusedAtCreate) {
  for (int64_t axis : {7, 0}) {
    ir::Model m;
    m.opset_imports = {{"", 17}};
    ir::Graph& g = *m.graph;
    ir::Value* x = Input(g, "x", DType::kFloat32, {2});
    ir::Value* y = g.CreateValue("y");
    ir::Node* n = g.AddNode("Softmax", {x}, {y}, "sm");
    n->SetAttribute(ir::Attribute::Int("axis", axis));
    g.AddOutput(y);
    auto session = Session::Create(std::move(m), Options());
    if (axis == 7) {
      ASSERT_FALSE(session.ok());
      EXPECT_EQ(session.status().message(), "node Softmax 'sm': axis 7 is out of range");
    } else {
      // Unimplemented on the device: the CPU kernel takes the node.
      ASSERT_TRUE(session.ok()) << session.status().message();
      EXPECT_EQ((*session)->placement().on_cpu, (std::vector<std::string>{"Softmax 'sm'"}));
    }
  }
}

// A type the device kernel does not take (int32 Add) falls back to the CPU.
TEST_F(DeviceExecutorTest, UnsupportedTypesFallBackToTheCpu) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* a = Input(g, "a", DType::kInt32, {2});
  ir::Value* b = Input(g, "b", DType::kInt32, {2});
  ir::Value* y = g.CreateValue("y");
  g.AddNode("Add", {a, b}, {y}, "add");
  g.AddOutput(y);
  auto session = std::move(Session::Create(std::move(m), Options())).value();
  EXPECT_EQ(session->placement().on_cpu, (std::vector<std::string>{"Add 'add'"}));
  auto out = session->Run(
      {Named(testing::MakeTensor<int32_t>({2}, {1, 2}), "a"), Named(testing::MakeTensor<int32_t>({2}, {10, 20}), "b")});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(testing::Values<int32_t>((*out)[0]), (std::vector<int32_t>{11, 22}));
}

TEST_F(DeviceExecutorTest, DeviceMemoryErrorsNameTheNode) {
  auto session = std::move(Session::Create(FallbackModel(), Options())).value();
  g_context->fail_allocations = true;
  auto out = session->Run({Named(Floats({2, 3}, {1, 2, 3, 4, 5, 6}), "x")});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(out.status().message().find("node Relu 'r1'"), std::string::npos) << out.status().message();
}

TEST_F(DeviceExecutorTest, DeviceTimeIsReportedWhenAsked) {
  SessionOptions o = Options();
  o.time_device = true;
  auto session = std::move(Session::Create(FallbackModel(), o)).value();
  RunStats stats;
  ASSERT_TRUE(session->Run({Named(Floats({2, 3}, {1, 2, 3, 4, 5, 6}), "x")}, &stats).ok());
  EXPECT_EQ(stats.device_seconds, 0.25);
}

// Device-resident runs: inputs uploaded once with ToDevice are read in place, outputs stay on the device, and a run
// without synchronize returns without waiting; ToHost brings an output back.
TEST_F(DeviceExecutorTest, ResidentInputsAndOutputsNeedNoCopies) {
  auto session = std::move(Session::Create(FallbackModel(), Options())).value();
  StatusOr<ir::Tensor> x = session->ToDevice(Named(Floats({2, 3}, {-1, 0, 1, 2, -3, 4}), "x"));
  ASSERT_TRUE(x.ok()) << x.status().message();
  EXPECT_FALSE(x->on_host());
  EXPECT_EQ(x->name(), "x");
  RunOptions run;
  run.outputs_on_device = true;
  run.synchronize = false;
  for (int i = 0; i < 2; ++i) {
    const int up = g_context->host_to_device, down = g_context->device_to_host, syncs = g_context->synchronizations;
    RunStats stats;
    auto out = session->Run({*x}, run, &stats);
    ASSERT_TRUE(out.ok()) << out.status().message();
    ASSERT_EQ(out->size(), 1u);
    EXPECT_FALSE((*out)[0].on_host());
    EXPECT_EQ((*out)[0].name(), "y");
    // Only the CPU node (Sigmoid) makes copies: its input down, its output up.
    EXPECT_EQ(g_context->host_to_device - up, 1) << i;
    EXPECT_EQ(g_context->device_to_host - down, 1) << i;
    EXPECT_EQ(stats.device_to_host_bytes, 24u) << i;
    EXPECT_EQ(g_context->synchronizations, syncs) << i;
    StatusOr<ir::Tensor> y = session->ToHost((*out)[0]);
    ASSERT_TRUE(y.ok()) << y.status().message();
    EXPECT_TRUE(y->on_host());
    EXPECT_EQ(y->name(), "y");
    EXPECT_NEAR(testing::Values<float>(*y)[5], 1 / (1 + std::exp(-4.f)), 1e-6);
  }
  // The host side of a CPU session: ToDevice and ToHost give the tensor itself.
  auto cpu = std::move(Session::Create(FallbackModel())).value();
  const ir::Tensor h = Floats({1}, {3});
  EXPECT_TRUE(cpu->ToDevice(h)->on_host());
  EXPECT_TRUE(cpu->Synchronize().ok());
}

TEST_F(DeviceExecutorTest, UnsynchronisedRunsReportDeviceErrorsLater) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", DType::kFloat32, {2});
  ir::Value* y = g.CreateValue("y");
  g.AddNode("Sqrt", {x}, {y}, "root");
  g.AddOutput(y);
  auto session = std::move(Session::Create(std::move(m), Options())).value();
  RunOptions run;
  run.synchronize = false;
  auto out = session->Run({Named(Floats({2}, {1, 4}), "x")}, run);
  ASSERT_FALSE(out.ok());  // host outputs need the device: synchronize = false needs outputs_on_device
  EXPECT_NE(out.status().message().find("needs outputs_on_device"), std::string::npos) << out.status().message();
  run.outputs_on_device = true;
  out = session->Run({Named(Floats({2}, {1, 4}), "x")}, run);
  ASSERT_TRUE(out.ok()) << out.status().message();  // the fault is still pending on the "device"
  Status st = session->Synchronize();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "running on fake:0: fake fault");
  EXPECT_TRUE(session->Synchronize().ok());
}

TEST_F(DeviceExecutorTest, ProfileGivesDeviceTimeForDeviceNodes) {
  auto session = std::move(Session::Create(FallbackModel(), Options())).value();
  RunOptions run;
  run.profile = true;
  RunStats stats;
  auto out = session->Run({Named(Floats({2, 3}, {1, 2, 3, 4, 5, 6}), "x")}, run, &stats);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(stats.nodes.size(), 3u);
  EXPECT_EQ(stats.nodes[0].node, "Relu 'r1'");
  EXPECT_TRUE(stats.nodes[0].on_device);
  EXPECT_EQ(stats.nodes[0].seconds, 1e-3);  // the fake's interval between two marks
  EXPECT_EQ(stats.nodes[1].node, "Sigmoid 's'");
  EXPECT_FALSE(stats.nodes[1].on_device);  // host time
  EXPECT_TRUE(stats.nodes[2].on_device);
  EXPECT_EQ(stats.nodes[2].seconds, 1e-3);
  EXPECT_EQ(g_context->marked, (std::vector<bool>{true, true, true, true}));
}

// Outputs downloaded by the executor land in the context's host memory (page-locked on CUDA).
TEST_F(DeviceExecutorTest, DownloadsUseTheContextsHostMemory) {
  auto session = std::move(Session::Create(FallbackModel(), Options())).value();
  auto out = session->Run({Named(Floats({2, 3}, {1, 2, 3, 4, 5, 6}), "x")});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(g_context->host_allocations, g_context->device_to_host);
  EXPECT_GE(g_context->host_allocations, 2);  // Sigmoid's input and the output y
}

TEST_F(DeviceExecutorTest, WithoutABackendCreateFailsClearly) {
  UnregisterDeviceBackend(Device::kCuda);
  auto session = Session::Create(FallbackModel(), Options());
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(session.status().message().find("no backend is registered"), std::string::npos)
      << session.status().message();
}

TEST_F(DeviceExecutorTest, CpuSessionsPlaceEverythingOnTheCpu) {
  auto session = std::move(Session::Create(FallbackModel())).value();
  EXPECT_EQ(session->DescribePlacement(), "cpu");
  EXPECT_EQ(session->placement().device, Device::kCpu);
  EXPECT_EQ(session->placement().nodes, 3);
  EXPECT_TRUE(session->placement().on_cpu.empty());
  EXPECT_EQ(g_context, nullptr);
}

}  // namespace
}  // namespace onnxamp::exec
