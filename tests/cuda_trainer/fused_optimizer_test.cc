// The fused CUDA optimizer step (trainer/cuda/fused_optimizer.h) against the CPU training step it replaces: the same
// steps run through ParameterStore, GradScaler::UnscaleAndCheck, ClipGradNorm, Optimizer::Step and
// GradScaler::Update in the order of Trainer::Step must give the same bits (parameters, optimizer state, scale,
// growth tracker, records); with clipping, whose norm is summed in another order, they agree within a bound. The
// host-side planning (chunk table, step scalars) and the option checks are tested without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "importer/model_io.h"
#include "runtime/common/half.h"
#include "tests/trainer/train_test_util.h"
#include "trainer/cuda/fused_optimizer.h"
#include "trainer/cuda/fused_optimizer_plan.h"
#include "trainer/graph/training_graph.h"
#include "trainer/optim/clip.h"
#include "trainer/optim/grad_scaler.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/optim/optimizer.h"
#include "trainer/state/parameter_store.h"

namespace onnxamp::trainer::cuda {
namespace {

bool HaveCudaDevice() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

#define REQUIRE_CUDA_DEVICE()                                     \
  do {                                                            \
    if (!HaveCudaDevice()) GTEST_SKIP() << "no CUDA device here"; \
  } while (0)

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr
#define CUDA_OK_OR_FAIL(expr) EXPECT_EQ((expr), cudaSuccess) << #expr  // where ASSERT cannot return

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

// A training scenario: the optimizer's options and the gradients of every step.
struct Scenario {
  FusedOptimizerOptions options;
  std::vector<int64_t> numels = {65536 + 1000, 513, 17, 1, 4096};
  int steps = 8;
  std::set<int> inf_steps;  // 1-based steps whose first micro-batch holds an inf (and a NaN) gradient
  float grad_magnitude = 1.0f;
  int64_t batch = 8;  // samples per micro-batch: the AddLoss weight
  uint32_t seed = 1;
};

// The CPU reference: Trainer::Step's optimizer half on a ParameterStore.
class CpuReference {
 public:
  static std::unique_ptr<CpuReference> Create(const Scenario& sc) {
    auto ref = std::unique_ptr<CpuReference>(new CpuReference());
    std::vector<ParameterSpec> specs;
    for (size_t i = 0; i < sc.numels.size(); ++i) specs.push_back({StrCat("p", i), {sc.numels[i]}});
    StatusOr<ParameterStore> store = ParameterStore::Create(specs);
    EXPECT_TRUE(store.ok()) << store.status().message();
    ref->store = std::make_unique<ParameterStore>(std::move(*store));
    const FusedOptimizerOptions& o = sc.options;
    StatusOr<std::unique_ptr<Optimizer>> opt = MakeOptimizer(o.kind, o);
    EXPECT_TRUE(opt.ok()) << opt.status().message();
    ref->optimizer = std::move(*opt);
    if (!o.groups.of.empty()) ref->optimizer->SetGroups(o.groups);
    StatusOr<GradScaler> scaler = GradScaler::Create(o.scaler);
    EXPECT_TRUE(scaler.ok()) << scaler.status().message();
    ref->scaler = std::make_unique<GradScaler>(*scaler);
    StatusOr<LrSchedule> schedule = LrSchedule::Create(o.schedule);
    EXPECT_TRUE(schedule.ok()) << schedule.status().message();
    ref->schedule = std::make_unique<LrSchedule>(*schedule);
    ref->clip_norm = o.clip_norm;
    ref->clip_value = o.clip_value;
    ref->ema_decay = o.ema_decay;
    ref->ema_warmup = o.ema_warmup;
    ref->swa_start = o.swa_start;
    return ref;
  }

  // micro[m][i]: micro-batch m's gradient of parameter i; losses[m] its loss.
  FusedStepRecord Step(const std::vector<std::vector<std::vector<float>>>& micro, const std::vector<float>& losses,
                       int64_t batch) {
    FusedStepRecord rec;
    rec.step = steps_done + 1;
    rec.loss_scale = scaler->scale();
    rec.lr = schedule->LrAt(steps_taken);
    store->ZeroGrads();
    double loss_sum = 0;
    int64_t samples = 0;
    for (size_t m = 0; m < micro.size(); ++m) {
      loss_sum += static_cast<double>(losses[m]) * static_cast<double>(batch);
      samples += batch;
      for (size_t i = 0; i < store->size(); ++i) {
        ir::Tensor g(DType::kFloat32, {static_cast<int64_t>(store->numel(i))});
        std::memcpy(g.mutable_data(), micro[m][i].data(), micro[m][i].size() * sizeof(float));
        // As the trainer: the first micro-batch's gradient set (a -0 stays -0), the later ones added.
        Status s = m == 0 ? store->SetGrad(i, g) : store->AccumulateGrad(i, g);
        EXPECT_TRUE(s.ok()) << s.message();
      }
    }
    rec.loss = loss_sum / static_cast<double>(samples);
    const bool found_inf = scaler->UnscaleAndCheck(*store);
    rec.skipped = found_inf;
    if (!found_inf) {
      if (clip_value > 0) {
        EXPECT_TRUE(ClipGradValue(*store, clip_value).ok());
      }
      if (clip_norm > 0) {
        StatusOr<float> norm = ClipGradNorm(*store, clip_norm);
        EXPECT_TRUE(norm.ok()) << norm.status().message();
        rec.grad_norm = norm.ok() ? *norm : -1;
      }
      Status s = optimizer->Step(*store, rec.lr);
      EXPECT_TRUE(s.ok()) << s.message();
      if (ema_decay > 0 || swa_start >= 0) {  // as Trainer::UpdateEma
        const float w = optim_math::AverageWeight(ema_decay, ema_warmup, swa_start, steps_taken);
        float* ema = store->FindState("ema");
        for (size_t i = 0; i < store->size(); ++i) {
          const std::span<const float> p = store->param(i);
          for (size_t j = 0; j < p.size(); ++j) {
            ema[store->offset(i) + j] = optim_math::Lerp(ema[store->offset(i) + j], p[j], w);
          }
        }
      }
      ++steps_taken;
    } else {
      ++skipped;
    }
    scaler->Update(found_inf);
    ++steps_done;
    return rec;
  }

  // Parameter i's slice of `state` (zeros when the optimizer never allocated it).
  std::vector<float> State(const std::string& state, size_t i) const {
    const float* flat = store->FindState(state);
    std::vector<float> out(store->numel(i), 0.0f);
    if (flat != nullptr) std::memcpy(out.data(), flat + store->offset(i), out.size() * sizeof(float));
    return out;
  }

  std::unique_ptr<ParameterStore> store;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<GradScaler> scaler;
  std::unique_ptr<LrSchedule> schedule;
  double clip_norm = 0;
  double clip_value = 0;
  double ema_decay = 0;
  bool ema_warmup = false;
  int64_t swa_start = -1;
  int64_t steps_done = 0, steps_taken = 0, skipped = 0;

 private:
  CpuReference() = default;
};

// Device memory of the test, freed at the end.
class DeviceBuffers {
 public:
  ~DeviceBuffers() {
    for (void* p : ptrs_) cudaFree(p);
  }
  float* Floats(size_t n) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(float)), cudaSuccess);
    ptrs_.push_back(p);
    return static_cast<float*>(p);
  }

 private:
  std::vector<void*> ptrs_;
};

// How two results must agree: bitwise, or within rtol * |reference| + atol * (the largest |reference| of the
// buffer).
struct Bound {
  bool bitwise = true;
  double rtol = 0;
  double atol = 0;
};

void ExpectClose(const std::vector<float>& gpu, const std::vector<float>& cpu, const Bound& bound,
                 const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  double max_abs = 0;
  for (float x : cpu) max_abs = std::max(max_abs, std::fabs(static_cast<double>(x)));
  size_t bad = 0;
  size_t first = 0;
  for (size_t j = 0; j < cpu.size(); ++j) {
    const bool ok = bound.bitwise ? Bits(gpu[j]) == Bits(cpu[j])
                                  : std::fabs(static_cast<double>(gpu[j]) - cpu[j]) <=
                                        bound.rtol * std::fabs(cpu[j]) + bound.atol * max_abs;
    if (!ok && bad++ == 0) first = j;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << cpu.size() << " elements differ, first at " << first
                     << ": gpu " << (cpu.empty() ? 0 : gpu[first]) << " cpu " << (cpu.empty() ? 0 : cpu[first]);
}

// The gradients of one step: micro-batches x parameters, normal values times the magnitude, with a -0 in every
// parameter of more than 2 elements (it stays -0 in a step's first micro-batch and becomes +0 or stays -0 as later
// ones add to it, as on the CPU), and an inf and a NaN in the
// first micro-batch of an inf step.
std::vector<std::vector<std::vector<float>>> StepGrads(const Scenario& sc, std::mt19937& rng, int step) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<std::vector<float>>> micro(sc.options.accumulate);
  for (auto& grads : micro) {
    for (int64_t n : sc.numels) {
      std::vector<float> g(n);
      for (float& x : g) x = normal(rng) * sc.grad_magnitude;
      if (n > 2) g[2] = -0.0f;
      grads.push_back(std::move(g));
    }
  }
  if (sc.inf_steps.count(step)) {
    micro[0][0][5] = std::numeric_limits<float>::infinity();
    micro[0][2][1] = std::numeric_limits<float>::quiet_NaN();
  }
  return micro;
}

std::vector<float> RandomParams(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> p(n);
  for (float& x : p) x = normal(rng);
  return p;
}

// Runs the scenario on the GPU and on the CPU and compares everything after every step (records after the end).
void RunAndCompare(const Scenario& sc, const Bound& bound) {
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreate(&stream));
  std::unique_ptr<CpuReference> cpu = CpuReference::Create(sc);
  ASSERT_NE(cpu, nullptr);
  StatusOr<std::unique_ptr<FusedOptimizer>> created = FusedOptimizer::Create(sc.options, sc.numels, stream);
  ASSERT_TRUE(created.ok()) << created.status().message();
  FusedOptimizer& gpu = **created;
  std::mt19937 rng(sc.seed);
  for (size_t i = 0; i < sc.numels.size(); ++i) {
    const std::vector<float> p = RandomParams(sc.numels[i], rng);
    ASSERT_TRUE(gpu.LoadParam(i, p.data()).ok());
    std::memcpy(cpu->store->param(i).data(), p.data(), p.size() * sizeof(float));
    if (sc.options.averaging()) {  // the average starts at the parameter (LoadParam sets both)
      std::memcpy(cpu->store->EnsureState("ema") + cpu->store->offset(i), p.data(), p.size() * sizeof(float));
    }
  }
  DeviceBuffers dev;
  // One set of gradient buffers per micro-batch, the same every step (the pointer table is reused after the first
  // step without accumulation, re-uploaded for every micro-batch with it).
  std::vector<std::vector<const float*>> dev_grads(sc.options.accumulate);
  for (auto& set : dev_grads) {
    for (int64_t n : sc.numels) set.push_back(dev.Floats(n));
  }
  float* dev_losses = dev.Floats(sc.options.accumulate * sc.steps);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<FusedStepRecord> cpu_records;
  for (int step = 1; step <= sc.steps; ++step) {
    const auto micro = StepGrads(sc, rng, step);
    std::vector<float> losses;
    for (int m = 0; m < sc.options.accumulate; ++m) {
      losses.push_back(std::fabs(normal(rng)) + 0.5f);
      float* loss = dev_losses + (step - 1) * sc.options.accumulate + m;
      CUDA_OK(cudaMemcpyAsync(loss, &losses.back(), sizeof(float), cudaMemcpyHostToDevice, stream));
      for (size_t i = 0; i < sc.numels.size(); ++i) {
        CUDA_OK(cudaMemcpyAsync(const_cast<float*>(dev_grads[m][i]), micro[m][i].data(),
                                micro[m][i].size() * sizeof(float), cudaMemcpyHostToDevice, stream));
      }
      CUDA_OK(cudaStreamSynchronize(stream));  // the host vectors go away
      ASSERT_TRUE(gpu.AddLoss(loss, static_cast<double>(sc.batch)).ok());
      if (sc.options.accumulate > 1) {
        ASSERT_TRUE(gpu.Accumulate(dev_grads[m]).ok());
      }
    }
    const Status stepped = sc.options.accumulate > 1 ? gpu.Step({}) : gpu.Step(dev_grads[0]);
    ASSERT_TRUE(stepped.ok()) << stepped.message();
    cpu_records.push_back(cpu->Step(micro, losses, sc.batch));
    // The seed and found_inf of the step, as the next micro-batch and the BatchNorm commit read them.
    float seed = 0;
    int32_t found_inf = -1;
    CUDA_OK(cudaMemcpyAsync(&seed, gpu.seed(), sizeof(seed), cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaMemcpyAsync(&found_inf, gpu.found_inf(), sizeof(found_inf), cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    EXPECT_EQ(Bits(seed), Bits(cpu->scaler->scale() / static_cast<float>(sc.options.accumulate))) << "step " << step;
    EXPECT_EQ(found_inf, cpu_records.back().skipped ? 1 : 0) << "step " << step;
  }
  StatusOr<std::vector<FusedStepRecord>> records = gpu.Drain();
  ASSERT_TRUE(records.ok()) << records.status().message();
  ASSERT_EQ(records->size(), cpu_records.size());
  for (size_t k = 0; k < cpu_records.size(); ++k) {
    const FusedStepRecord& g = (*records)[k];
    const FusedStepRecord& c = cpu_records[k];
    EXPECT_EQ(g.step, c.step) << "record " << k;
    EXPECT_EQ(g.loss, c.loss) << "record " << k;
    EXPECT_EQ(Bits(g.loss_scale), Bits(c.loss_scale)) << "record " << k;
    EXPECT_EQ(g.skipped, c.skipped) << "record " << k;
    EXPECT_EQ(g.lr, c.lr) << "record " << k;
    EXPECT_FALSE(g.norm_error) << "record " << k;
    if (sc.options.clip_norm > 0 && !c.skipped) {
      EXPECT_NEAR(g.grad_norm, c.grad_norm, 1e-5 * c.grad_norm) << "record " << k;
    } else {
      EXPECT_EQ(g.grad_norm, -1.0f) << "record " << k;
    }
  }
  EXPECT_EQ(gpu.steps_taken(), cpu->steps_taken);
  for (size_t i = 0; i < sc.numels.size(); ++i) {
    std::vector<float> p(sc.numels[i]);
    ASSERT_TRUE(gpu.ReadParam(i, p.data()).ok());
    const std::span<const float> ref = cpu->store->param(i);
    ExpectClose(p, std::vector<float>(ref.begin(), ref.end()), bound, "parameter " + std::to_string(i));
    for (const std::string& name : gpu.state_names()) {
      std::vector<float> s(sc.numels[i]);
      ASSERT_TRUE(gpu.ReadState(name, i, s.data()).ok());
      ExpectClose(s, cpu->State(name, i), bound, name + " of parameter " + std::to_string(i));
    }
  }
  std::vector<std::string> names = cpu->optimizer->state_names();
  if (sc.options.averaging()) names.push_back("ema");
  EXPECT_EQ(gpu.state_names(), names);
  if (sc.options.averaging()) {
    // SwapEma exchanges the parameters with their average; a second exchange gives both back bit for bit.
    ASSERT_TRUE(gpu.SwapEma().ok());
    for (size_t i = 0; i < sc.numels.size(); ++i) {
      std::vector<float> p(sc.numels[i]), e(sc.numels[i]);
      ASSERT_TRUE(gpu.ReadParam(i, p.data()).ok());
      ASSERT_TRUE(gpu.ReadState("ema", i, e.data()).ok());
      const std::span<const float> ref = cpu->store->param(i);
      ExpectClose(p, cpu->State("ema", i), bound, "swapped parameter " + std::to_string(i));
      ExpectClose(e, std::vector<float>(ref.begin(), ref.end()), bound, "swapped ema " + std::to_string(i));
    }
    ASSERT_TRUE(gpu.SwapEma().ok());
    for (size_t i = 0; i < sc.numels.size(); ++i) {
      std::vector<float> p(sc.numels[i]);
      ASSERT_TRUE(gpu.ReadParam(i, p.data()).ok());
      const std::span<const float> ref = cpu->store->param(i);
      ExpectClose(p, std::vector<float>(ref.begin(), ref.end()), bound, "parameter after two swaps");
    }
  }
  const std::optional<GradScalerState> gs = gpu.ScalerState();
  const std::optional<GradScalerState> cs = cpu->scaler->State();
  ASSERT_EQ(gs.has_value(), cs.has_value());
  if (cs) {
    EXPECT_EQ(Bits(gs->scale), Bits(cs->scale));
    EXPECT_EQ(gs->growth_tracker, cs->growth_tracker);
    EXPECT_EQ(gs->growth_factor, cs->growth_factor);
    EXPECT_EQ(gs->backoff_factor, cs->backoff_factor);
    EXPECT_EQ(gs->growth_interval, cs->growth_interval);
  }
  created->reset();
  CUDA_OK(cudaStreamDestroy(stream));
}

GradScalerOptions Dynamic(double init_scale, int64_t growth_interval) {
  GradScalerOptions s;
  s.mode = LossScaleMode::kDynamic;
  s.init_scale = init_scale;
  s.growth_interval = growth_interval;
  return s;
}

GradScalerOptions Static(double scale) {
  GradScalerOptions s;
  s.mode = LossScaleMode::kStatic;
  s.init_scale = scale;
  return s;
}

GradScalerOptions Disabled() {
  GradScalerOptions s;
  s.mode = LossScaleMode::kDisabled;
  return s;
}

LrScheduleOptions Cosine(int64_t total_steps) {
  LrScheduleOptions s;
  s.kind = LrScheduleKind::kCosine;
  s.base_lr = 0.05;
  s.total_steps = total_steps;
  s.min_lr = 1e-4;
  s.warmup_steps = 2;
  return s;
}

Scenario SgdScenario(GradScalerOptions scaler) {
  Scenario sc;
  sc.options.kind = FusedOptimizerKind::kSgd;
  sc.options.sgd.momentum = 0.9;
  sc.options.sgd.nesterov = true;
  sc.options.sgd.weight_decay = 1e-3;
  sc.options.scaler = scaler;
  sc.options.schedule = Cosine(10);
  return sc;
}

Scenario AdamScenario(bool decoupled, bool amsgrad, GradScalerOptions scaler) {
  Scenario sc;
  sc.options.kind = decoupled ? FusedOptimizerKind::kAdamW : FusedOptimizerKind::kAdam;
  sc.options.adam = decoupled ? AdamWDefaults() : AdamOptions();
  if (!decoupled) sc.options.adam.weight_decay = 1e-2;
  sc.options.adam.amsgrad = amsgrad;
  sc.options.scaler = scaler;
  sc.options.schedule = Cosine(10);
  sc.options.schedule.base_lr = 1e-2;
  return sc;
}

// Dynamic scaling: growth every 3 clean steps, backoffs on steps 5 and 6 (the second one hits min_scale).
void MakeDynamic(Scenario* sc) {
  sc->options.scaler = Dynamic(256.0, 3);
  sc->options.scaler.min_scale = 256.0;
  sc->inf_steps = {5, 6};
  sc->steps = 11;
  sc->grad_magnitude = 100.0f;
}

const Bound kBitwise;
// Clipping: the GPU sums the squares in another order, so the norm and the coefficient differ by a few float32
// ulps, and every clipped value with them: 1e-5 relative (about 80 ulps) plus 1e-6 of the buffer's largest value
// (for values near zero after cancellation), far below what a wrong step gives (the coefficient is about 0.01).
const Bound kClipBound{false, 1e-5, 1e-6};

// ---- GPU tests -------------------------------------------------------------------------------------------------

TEST(FusedOptimizerTest, SgdMomentumNesterovWeightDecayDynamicScaling) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = SgdScenario(Dynamic(256.0, 3));
  MakeDynamic(&sc);
  RunAndCompare(sc, kBitwise);
}

TEST(FusedOptimizerTest, SgdDampenedMomentumStaticScaleWithInfStep) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = SgdScenario(Static(1024.0));
  sc.options.sgd.nesterov = false;
  sc.options.sgd.dampening = 0.25;
  sc.inf_steps = {1, 4};  // the momentum buffer starts at the first step taken
  sc.grad_magnitude = 1000.0f;
  RunAndCompare(sc, kBitwise);
}

TEST(FusedOptimizerTest, SgdPlainAndMomentumOnlyDisabledScaling) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = SgdScenario(Disabled());
  sc.options.sgd = SgdOptions();
  RunAndCompare(sc, kBitwise);
  // Momentum without weight decay keeps a zero gradient's sign in the buffer: the CPU's -0 (the first micro-batch's
  // gradient as computed) must be the GPU's too.
  sc.options.sgd.momentum = 0.9;
  RunAndCompare(sc, kBitwise);
}

TEST(FusedOptimizerTest, SgdClipped) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = SgdScenario(Dynamic(256.0, 3));
  MakeDynamic(&sc);
  sc.options.clip_norm = 1.0;  // the unscaled gradients' norm is about 100: every step is clipped
  RunAndCompare(sc, kClipBound);
}

TEST(FusedOptimizerTest, AdamDynamicScaling) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = AdamScenario(false, false, Dynamic(256.0, 3));
  MakeDynamic(&sc);
  RunAndCompare(sc, kBitwise);
}

TEST(FusedOptimizerTest, AdamStaticScaling) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = AdamScenario(false, false, Static(64.0));
  sc.inf_steps = {3};
  sc.grad_magnitude = 64.0f;
  RunAndCompare(sc, kBitwise);
}

TEST(FusedOptimizerTest, AdamDisabledScaling) {
  REQUIRE_CUDA_DEVICE();
  RunAndCompare(AdamScenario(false, false, Disabled()), kBitwise);
}

TEST(FusedOptimizerTest, AdamClipped) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = AdamScenario(false, false, Disabled());
  sc.options.clip_norm = 1.0;
  RunAndCompare(sc, kClipBound);
}

TEST(FusedOptimizerTest, AdamWAmsgradDynamicScaling) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = AdamScenario(true, true, Dynamic(256.0, 3));
  MakeDynamic(&sc);
  RunAndCompare(sc, kBitwise);
}

TEST(FusedOptimizerTest, AdamWAmsgradStaticScaling) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = AdamScenario(true, true, Static(8.0));
  sc.inf_steps = {2};
  RunAndCompare(sc, kBitwise);
}

TEST(FusedOptimizerTest, AdamWAmsgradDisabledScaling) {
  REQUIRE_CUDA_DEVICE();
  RunAndCompare(AdamScenario(true, true, Disabled()), kBitwise);
}

TEST(FusedOptimizerTest, AdamWAmsgradClippedDynamicScaling) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = AdamScenario(true, true, Dynamic(256.0, 3));
  MakeDynamic(&sc);
  sc.options.clip_norm = 0.5;
  RunAndCompare(sc, kClipBound);
}

// Parameter groups: the five parameters in three groups (the default, no weight decay, half the learning rate
// without weight decay), each column of the scalar table what Optimizer::Step computes for its group.
ParamGroups ThreeGroups() {
  ParamGroups g;
  g.groups = {ParamGroup{}, ParamGroup{1.0, false}, ParamGroup{0.5, false}};
  g.of = {0, 1, 2, 1, 0};
  return g;
}

TEST(FusedOptimizerTest, AdamWParameterGroupsDynamicScaling) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = AdamScenario(true, false, Dynamic(256.0, 3));
  MakeDynamic(&sc);
  sc.options.groups = ThreeGroups();
  RunAndCompare(sc, kBitwise);
}

// EMA: the average lerped in the update pass with the weight of the step count (warm-up), skipped steps leaving it,
// the low-precision copies following SwapEma.
TEST(FusedOptimizerTest, AdamWEmaWithWarmupDynamicScaling) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = AdamScenario(true, false, Dynamic(256.0, 3));
  MakeDynamic(&sc);
  sc.options.ema_decay = 0.9;
  sc.options.ema_warmup = true;
  sc.options.low_precision = DType::kFloat16;
  RunAndCompare(sc, kBitwise);
}

// Stochastic weight averaging in the EMA's buffer: weight 0 before the start (inf steps in between), then 1 / (k + 1),
// the first update a copy.
TEST(FusedOptimizerTest, SgdSwaDynamicScaling) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = SgdScenario(Dynamic(256.0, 3));
  MakeDynamic(&sc);
  sc.options.swa_start = 3;
  sc.options.low_precision = DType::kBFloat16;
  RunAndCompare(sc, kBitwise);
}

TEST(FusedOptimizerTest, SgdParameterGroupsClipped) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = SgdScenario(Dynamic(256.0, 3));
  MakeDynamic(&sc);
  sc.options.clip_norm = 1.0;
  sc.options.groups = ThreeGroups();
  RunAndCompare(sc, kClipBound);
}

Scenario RmspropScenario(bool centered, double momentum, GradScalerOptions scaler) {
  Scenario sc;
  sc.options.kind = FusedOptimizerKind::kRmsprop;
  sc.options.rmsprop.alpha = 0.9;
  sc.options.rmsprop.weight_decay = 1e-3;
  sc.options.rmsprop.centered = centered;
  sc.options.rmsprop.momentum = momentum;
  sc.options.scaler = scaler;
  sc.options.schedule = Cosine(10);
  sc.options.schedule.base_lr = 1e-2;
  return sc;
}

Scenario LionScenario(GradScalerOptions scaler) {
  Scenario sc;
  sc.options.kind = FusedOptimizerKind::kLion;
  sc.options.lion.weight_decay = 0.1;
  sc.options.scaler = scaler;
  sc.options.schedule = Cosine(10);
  sc.options.schedule.base_lr = 1e-3;
  return sc;
}

// RMSprop with its three buffers (square_avg, momentum_buffer, grad_avg), and plain.
// Clipping by value in the update pass: the clamped gradients of every step (at magnitude 100 every element is
// clamped, at 1 some), as the CPU's ClipGradValue.
TEST(FusedOptimizerTest, AdamWClippedByValueDynamicScaling) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = AdamScenario(true, false, Dynamic(256.0, 3));
  MakeDynamic(&sc);
  sc.options.clip_value = 0.5;
  RunAndCompare(sc, kBitwise);
  sc.grad_magnitude = 1.0f;
  RunAndCompare(sc, kBitwise);
}

TEST(FusedOptimizerTest, RmspropCenteredMomentumDynamicScaling) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = RmspropScenario(true, 0.9, Dynamic(256.0, 3));
  MakeDynamic(&sc);
  RunAndCompare(sc, kBitwise);
}

// The two other buffer combinations: the state slots are found by name, so grad_avg without momentum_buffer and the
// reverse must each land in their place.
TEST(FusedOptimizerTest, RmspropCenteredWithoutMomentumAndMomentumWithoutCentering) {
  REQUIRE_CUDA_DEVICE();
  RunAndCompare(RmspropScenario(true, 0.0, Disabled()), kBitwise);
  RunAndCompare(RmspropScenario(false, 0.5, Disabled()), kBitwise);
}

TEST(FusedOptimizerTest, RmspropPlainStaticScaleGroupsClipped) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = RmspropScenario(false, 0.0, Static(64.0));
  sc.inf_steps = {3};
  sc.grad_magnitude = 64.0f;
  sc.options.groups = ThreeGroups();
  sc.options.clip_norm = 0.5;
  RunAndCompare(sc, kClipBound);
}

// Adagrad: the sum starts at the initial accumulator value on the first step taken (an inf step before it), the rate
// decays with the steps taken.
TEST(FusedOptimizerTest, AdagradStaticScaleWithInfFirstStep) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc;
  sc.options.kind = FusedOptimizerKind::kAdagrad;
  sc.options.adagrad.lr_decay = 0.1;
  sc.options.adagrad.initial_accumulator_value = 0.5;
  sc.options.adagrad.weight_decay = 1e-3;
  sc.options.scaler = Static(64.0);
  sc.options.schedule = Cosine(10);
  sc.options.schedule.base_lr = 1e-2;
  sc.inf_steps = {1, 4};
  sc.grad_magnitude = 64.0f;
  RunAndCompare(sc, kBitwise);
}

// RAdam across its switch from momentum SGD to the rectified step (beta2 0.9: from the sixth step taken on), with
// skipped steps before and after it.
TEST(FusedOptimizerTest, RadamDynamicScalingAcrossRectification) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc;
  sc.options.kind = FusedOptimizerKind::kRadam;
  sc.options.radam.beta2 = 0.9;
  sc.options.radam.weight_decay = 1e-3;
  sc.options.scaler = Dynamic(256.0, 3);
  sc.options.schedule = Cosine(10);
  sc.options.schedule.base_lr = 1e-2;
  MakeDynamic(&sc);
  RunAndCompare(sc, kBitwise);
}

// RAdamW: the decoupled decay on the device as on the CPU, with parameter groups (one without decay).
TEST(FusedOptimizerTest, RadamDecoupledDecayWithGroups) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc;
  sc.options.kind = FusedOptimizerKind::kRadam;
  sc.options.radam.beta2 = 0.9;
  sc.options.radam.weight_decay = 0.1;
  sc.options.radam.decoupled_weight_decay = true;
  sc.options.scaler = Disabled();
  sc.options.groups = ThreeGroups();
  RunAndCompare(sc, kBitwise);
}

// NAdam, L2 and decoupled: the momentum cache's product (a function of the steps taken) in the scalar table, skipped
// steps moving it on no more than the CPU's step counts.
TEST(FusedOptimizerTest, NadamDynamicScalingL2AndDecoupled) {
  REQUIRE_CUDA_DEVICE();
  for (bool decoupled : {false, true}) {
    Scenario sc;
    sc.options.kind = FusedOptimizerKind::kNadam;
    sc.options.nadam.beta2 = 0.99;
    sc.options.nadam.weight_decay = 1e-2;
    sc.options.nadam.momentum_decay = 0.05;
    sc.options.nadam.decoupled_weight_decay = decoupled;
    sc.options.scaler = Dynamic(256.0, 3);
    sc.options.schedule = Cosine(10);
    sc.options.schedule.base_lr = 1e-2;
    MakeDynamic(&sc);
    RunAndCompare(sc, kBitwise);
  }
}

TEST(FusedOptimizerTest, LionDynamicScalingWithEma) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = LionScenario(Dynamic(256.0, 3));
  MakeDynamic(&sc);
  sc.options.ema_decay = 0.9;
  sc.options.low_precision = DType::kBFloat16;
  RunAndCompare(sc, kBitwise);
}

TEST(FusedOptimizerTest, LionParameterGroupsDisabledScaling) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = LionScenario(Disabled());
  sc.options.groups = ThreeGroups();
  RunAndCompare(sc, kBitwise);
}

TEST(FusedOptimizerTest, AccumulatesThreeMicroBatchesAsTheCpu) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = AdamScenario(true, false, Dynamic(256.0, 2));
  sc.options.accumulate = 3;
  sc.inf_steps = {3};
  sc.grad_magnitude = 100.0f;
  RunAndCompare(sc, kBitwise);
  Scenario sgd = SgdScenario(Disabled());
  sgd.options.accumulate = 3;
  RunAndCompare(sgd, kBitwise);
}

// The low-precision copies are the CPU's float->half / float->bfloat16 conversions of the master weights, after
// LoadParam and after every step.
void CheckLowPrecision(DType low) {
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreate(&stream));
  Scenario sc = AdamScenario(true, false, Disabled());
  sc.options.low_precision = low;
  StatusOr<std::unique_ptr<FusedOptimizer>> created = FusedOptimizer::Create(sc.options, sc.numels, stream);
  ASSERT_TRUE(created.ok()) << created.status().message();
  FusedOptimizer& gpu = **created;
  std::mt19937 rng(7);
  DeviceBuffers dev;
  std::vector<const float*> grads;
  for (size_t i = 0; i < sc.numels.size(); ++i) {
    std::vector<float> p = RandomParams(sc.numels[i], rng);
    p[0] = 1e-6f * p[0];                    // subnormal in float16
    if (sc.numels[i] > 1) p[1] = 70000.0f;  // inf in float16
    ASSERT_TRUE(gpu.LoadParam(i, p.data()).ok());
    const std::vector<float> g = RandomParams(sc.numels[i], rng);
    float* d = dev.Floats(g.size());
    CUDA_OK(cudaMemcpy(d, g.data(), g.size() * sizeof(float), cudaMemcpyHostToDevice));
    grads.push_back(d);
  }
  auto check = [&](const std::string& when) {
    ASSERT_NE(gpu.low_precision(0), nullptr);
    for (size_t i = 0; i < sc.numels.size(); ++i) {
      std::vector<float> p(sc.numels[i]);
      std::vector<uint16_t> lp(sc.numels[i]);
      ASSERT_TRUE(gpu.ReadParam(i, p.data()).ok());
      CUDA_OK(cudaMemcpy(lp.data(), gpu.low_precision(i), lp.size() * 2, cudaMemcpyDeviceToHost));
      size_t bad = 0;
      for (size_t j = 0; j < p.size(); ++j) {
        const uint16_t want = low == DType::kFloat16 ? FloatToHalfBits(p[j]) : FloatToBFloat16Bits(p[j]);
        bad += lp[j] != want;
      }
      EXPECT_EQ(bad, 0u) << DTypeName(low) << " copy of parameter " << i << " " << when;
    }
  };
  check("after LoadParam");
  for (int step = 0; step < 3; ++step) ASSERT_TRUE(gpu.Step(grads).ok());
  check("after 3 steps");
  created->reset();
  CUDA_OK(cudaStreamDestroy(stream));
}

TEST(FusedOptimizerTest, LowPrecisionCopiesAreTheCpuConversions) {
  REQUIRE_CUDA_DEVICE();
  CheckLowPrecision(DType::kFloat16);
  CheckLowPrecision(DType::kBFloat16);
  // None without a low-precision dtype.
  StatusOr<std::unique_ptr<FusedOptimizer>> plain = FusedOptimizer::Create(FusedOptimizerOptions(), {4}, nullptr);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ((*plain)->low_precision(0), nullptr);
}

// State loaded into the fused optimizer continues exactly as the CPU optimizer restored from the same state: the
// round trips of parameters, state, scaler and counters, and their effect on the following steps.
TEST(FusedOptimizerTest, RestoredStateContinuesAsTheCpu) {
  REQUIRE_CUDA_DEVICE();
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreate(&stream));
  Scenario sc = AdamScenario(true, true, Dynamic(256.0, 4));
  sc.grad_magnitude = 100.0f;
  std::unique_ptr<CpuReference> cpu = CpuReference::Create(sc);
  StatusOr<std::unique_ptr<FusedOptimizer>> created = FusedOptimizer::Create(sc.options, sc.numels, stream);
  ASSERT_TRUE(created.ok()) << created.status().message();
  FusedOptimizer& gpu = **created;
  std::mt19937 rng(3);
  // Before any step: zero state, the initial scale, no steps.
  std::vector<float> zeros(sc.numels[0], 1.0f);
  ASSERT_TRUE(gpu.ReadState("exp_avg", 0, zeros.data()).ok());
  EXPECT_EQ(zeros, std::vector<float>(sc.numels[0], 0.0f));
  EXPECT_EQ(gpu.steps_taken(), 0);
  // A checkpoint: parameters, state (exp_avg_sq >= 0), scaler, counters (7 done, 5 taken, 2 skipped).
  const std::vector<std::string> names = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  EXPECT_EQ(gpu.state_names(), names);
  for (size_t i = 0; i < sc.numels.size(); ++i) {
    const std::vector<float> p = RandomParams(sc.numels[i], rng);
    ASSERT_TRUE(gpu.LoadParam(i, p.data()).ok());
    std::memcpy(cpu->store->param(i).data(), p.data(), p.size() * sizeof(float));
    std::vector<float> back(p.size());
    ASSERT_TRUE(gpu.ReadParam(i, back.data()).ok());
    ExpectClose(back, p, kBitwise, "ReadParam after LoadParam");
    for (const std::string& name : names) {
      std::vector<float> s = RandomParams(sc.numels[i], rng);
      if (name != "exp_avg") {
        for (float& x : s) x = x * x * 1e-4f;
      }
      ASSERT_TRUE(gpu.LoadState(name, i, s.data()).ok());
      std::memcpy(cpu->store->EnsureState(name) + cpu->store->offset(i), s.data(), s.size() * sizeof(float));
      std::vector<float> read(s.size());
      ASSERT_TRUE(gpu.ReadState(name, i, read.data()).ok());
      ExpectClose(read, s, kBitwise, "ReadState after LoadState of " + name);
    }
  }
  EXPECT_FALSE(gpu.LoadState("momentum_buffer", 0, zeros.data()).ok());
  EXPECT_FALSE(gpu.ReadState("exp_avg", sc.numels.size(), zeros.data()).ok());
  GradScalerState scaler;
  scaler.scale = 512.0f;
  scaler.growth_factor = 4.0;
  scaler.backoff_factor = 0.25;
  scaler.growth_interval = 3;
  scaler.growth_tracker = 1;
  ASSERT_TRUE(gpu.RestoreScaler(scaler).ok());
  ASSERT_TRUE(cpu->scaler->Restore(scaler).ok());
  const std::optional<GradScalerState> restored = gpu.ScalerState();
  ASSERT_TRUE(restored.has_value());
  EXPECT_EQ(restored->scale, 512.0f);
  EXPECT_EQ(restored->growth_tracker, 1);
  EXPECT_EQ(restored->growth_factor, 4.0);
  EXPECT_EQ(restored->backoff_factor, 0.25);
  EXPECT_EQ(restored->growth_interval, 3);
  GradScalerState bad = scaler;
  bad.growth_tracker = 3;  // >= growth_interval
  EXPECT_FALSE(gpu.RestoreScaler(bad).ok());
  EXPECT_EQ(gpu.ScalerState()->growth_tracker, 1);  // unchanged
  EXPECT_FALSE(gpu.RestoreCounters(7, 5, 1).ok());
  ASSERT_TRUE(gpu.RestoreCounters(7, 5, 2).ok());
  EXPECT_EQ(gpu.steps_taken(), 5);
  ASSERT_TRUE(cpu->optimizer->RestoreStepCounts(std::vector<int64_t>(sc.numels.size(), 5)).ok());
  cpu->steps_done = 7;
  cpu->steps_taken = 5;
  cpu->skipped = 2;
  // The seed follows the restored scale.
  float seed = 0;
  CUDA_OK(cudaMemcpy(&seed, gpu.seed(), sizeof(seed), cudaMemcpyDeviceToHost));
  EXPECT_EQ(seed, 512.0f);
  // Four more steps, one of them with an inf: same bits as the CPU.
  sc.inf_steps = {2};
  DeviceBuffers dev;
  std::vector<const float*> grads;
  for (int64_t n : sc.numels) grads.push_back(dev.Floats(n));
  float* loss = dev.Floats(1);
  const float one = 1.0f;
  CUDA_OK(cudaMemcpy(loss, &one, sizeof(one), cudaMemcpyHostToDevice));
  for (int step = 1; step <= 4; ++step) {
    const auto micro = StepGrads(sc, rng, step);
    for (size_t i = 0; i < sc.numels.size(); ++i) {
      CUDA_OK(cudaMemcpy(const_cast<float*>(grads[i]), micro[0][i].data(), micro[0][i].size() * sizeof(float),
                         cudaMemcpyHostToDevice));
    }
    ASSERT_TRUE(gpu.AddLoss(loss, 1.0).ok());
    ASSERT_TRUE(gpu.Step(grads).ok());
    CUDA_OK(cudaStreamSynchronize(stream));
    const FusedStepRecord c = cpu->Step(micro, {1.0f}, 1);
    EXPECT_EQ(c.step, 7 + step);
  }
  StatusOr<std::vector<FusedStepRecord>> records = gpu.Drain();
  ASSERT_TRUE(records.ok()) << records.status().message();
  ASSERT_EQ(records->size(), 4u);
  EXPECT_EQ(records->front().step, 8);
  EXPECT_EQ(records->back().step, 11);
  EXPECT_EQ(records->front().lr, cpu->schedule->LrAt(5));
  EXPECT_EQ(gpu.steps_taken(), cpu->steps_taken);
  for (size_t i = 0; i < sc.numels.size(); ++i) {
    std::vector<float> p(sc.numels[i]);
    ASSERT_TRUE(gpu.ReadParam(i, p.data()).ok());
    const std::span<const float> ref = cpu->store->param(i);
    ExpectClose(p, std::vector<float>(ref.begin(), ref.end()), kBitwise, "parameter " + std::to_string(i));
    for (const std::string& name : names) {
      std::vector<float> s(sc.numels[i]);
      ASSERT_TRUE(gpu.ReadState(name, i, s.data()).ok());
      ExpectClose(s, cpu->State(name, i), kBitwise, name + " of parameter " + std::to_string(i));
    }
  }
  EXPECT_EQ(Bits(gpu.ScalerState()->scale), Bits(cpu->scaler->State()->scale));
  EXPECT_EQ(gpu.ScalerState()->growth_tracker, cpu->scaler->State()->growth_tracker);
  created->reset();
  CUDA_OK(cudaStreamDestroy(stream));
}

// More than 4096 steps without a Drain: Step drains the device ring by itself and keeps the records; the scalar
// table grows past its first capacity. Every record and the final weights equal the CPU's.
TEST(FusedOptimizerTest, DrainsMoreThan4096Steps) {
  REQUIRE_CUDA_DEVICE();
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreate(&stream));
  Scenario sc = SgdScenario(Dynamic(1024.0, 1000));
  sc.numels = {5, 3};
  sc.options.schedule = Cosine(4200);
  const int kSteps = 4100;
  std::unique_ptr<CpuReference> cpu = CpuReference::Create(sc);
  StatusOr<std::unique_ptr<FusedOptimizer>> created = FusedOptimizer::Create(sc.options, sc.numels, stream);
  ASSERT_TRUE(created.ok()) << created.status().message();
  FusedOptimizer& gpu = **created;
  std::mt19937 rng(11);
  DeviceBuffers dev;
  // Every step's gradients uploaded first, one buffer per step and parameter.
  std::vector<std::vector<std::vector<float>>> all;
  std::vector<std::vector<const float*>> dev_grads;
  float* loss = dev.Floats(1);
  const float two = 2.0f;
  CUDA_OK(cudaMemcpy(loss, &two, sizeof(two), cudaMemcpyHostToDevice));
  for (int step = 1; step <= kSteps; ++step) {
    auto micro = StepGrads(sc, rng, step);
    if (step % 700 == 0) micro[0][1][0] = std::numeric_limits<float>::infinity();
    std::vector<const float*> set;
    for (size_t i = 0; i < sc.numels.size(); ++i) {
      float* d = dev.Floats(sc.numels[i]);
      CUDA_OK(cudaMemcpy(d, micro[0][i].data(), micro[0][i].size() * sizeof(float), cudaMemcpyHostToDevice));
      set.push_back(d);
    }
    dev_grads.push_back(set);
    all.push_back(micro[0]);
  }
  std::vector<FusedStepRecord> cpu_records;
  for (int step = 1; step <= kSteps; ++step) {
    ASSERT_TRUE(gpu.AddLoss(loss, 3.0).ok());
    ASSERT_TRUE(gpu.Step(dev_grads[step - 1]).ok());
    cpu_records.push_back(cpu->Step({all[step - 1]}, {2.0f}, 3));
  }
  StatusOr<std::vector<FusedStepRecord>> records = gpu.Drain();
  ASSERT_TRUE(records.ok()) << records.status().message();
  ASSERT_EQ(records->size(), static_cast<size_t>(kSteps));
  for (int k = 0; k < kSteps; ++k) {
    const FusedStepRecord& g = (*records)[k];
    const FusedStepRecord& c = cpu_records[k];
    ASSERT_EQ(g.step, c.step) << k;
    ASSERT_EQ(g.skipped, c.skipped) << k;
    ASSERT_EQ(g.lr, c.lr) << k;
    ASSERT_EQ(g.loss, c.loss) << k;
    ASSERT_EQ(Bits(g.loss_scale), Bits(c.loss_scale)) << k;
  }
  StatusOr<std::vector<FusedStepRecord>> none = gpu.Drain();
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  for (size_t i = 0; i < sc.numels.size(); ++i) {
    std::vector<float> p(sc.numels[i]);
    ASSERT_TRUE(gpu.ReadParam(i, p.data()).ok());
    const std::span<const float> ref = cpu->store->param(i);
    ExpectClose(p, std::vector<float>(ref.begin(), ref.end()), kBitwise, "parameter " + std::to_string(i));
  }
  created->reset();
  CUDA_OK(cudaStreamDestroy(stream));
}

// A fused optimizer on its own stream and its CPU reference, stepped together one step at a time: each step's
// gradients (StepGrads, optionally changed by `tweak`) uploaded into one set of device buffers, the loss 2 over
// `batch` samples.
class Lockstep {
 public:
  Lockstep(const Scenario& sc, uint32_t seed) : sc_(sc), rng_(seed) {
    CUDA_OK_OR_FAIL(cudaStreamCreate(&stream_));
    cpu_ = CpuReference::Create(sc);
    StatusOr<std::unique_ptr<FusedOptimizer>> created = FusedOptimizer::Create(sc.options, sc.numels, stream_);
    EXPECT_TRUE(created.ok()) << created.status().message();
    if (created.ok()) gpu_ = std::move(created).value();
    for (int64_t n : sc.numels) grads_.push_back(dev_.Floats(n));
    loss_ = dev_.Floats(1);
    const float two = 2.0f;
    CUDA_OK_OR_FAIL(cudaMemcpy(loss_, &two, sizeof(two), cudaMemcpyHostToDevice));
  }
  ~Lockstep() {
    gpu_.reset();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  bool ok() const { return gpu_ != nullptr && cpu_ != nullptr; }
  FusedOptimizer& gpu() { return *gpu_; }
  CpuReference& cpu() { return *cpu_; }

  // One step on both sides; the CPU's record.
  FusedStepRecord Step(int step, const std::function<void(std::vector<std::vector<float>>&)>& tweak = {}) {
    auto micro = StepGrads(sc_, rng_, step);
    if (tweak) tweak(micro[0]);
    for (size_t i = 0; i < sc_.numels.size(); ++i) {
      EXPECT_EQ(cudaMemcpyAsync(const_cast<float*>(grads_[i]), micro[0][i].data(), micro[0][i].size() * sizeof(float),
                                cudaMemcpyHostToDevice, stream_),
                cudaSuccess);
    }
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);  // the host vectors go away
    EXPECT_TRUE(gpu_->AddLoss(loss_, static_cast<double>(sc_.batch)).ok());
    const Status st = gpu_->Step(grads_);
    EXPECT_TRUE(st.ok()) << st.message();
    return cpu_->Step({micro[0]}, {2.0f}, sc_.batch);
  }

  // The parameters of both sides, bit for bit.
  void ExpectSameParameters() {
    for (size_t i = 0; i < sc_.numels.size(); ++i) {
      std::vector<float> p(sc_.numels[i]);
      ASSERT_TRUE(gpu_->ReadParam(i, p.data()).ok());
      const std::span<const float> ref = cpu_->store->param(i);
      ExpectClose(p, std::vector<float>(ref.begin(), ref.end()), kBitwise, "parameter " + std::to_string(i));
    }
  }

 private:
  Scenario sc_;
  std::mt19937 rng_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<CpuReference> cpu_;
  std::unique_ptr<FusedOptimizer> gpu_;
  DeviceBuffers dev_;
  std::vector<const float*> grads_;
  float* loss_ = nullptr;
};

// A long run with parameter groups: the scalar table is rebased at the device's step count when a drain finds more
// than 4096 steps since its base (a drain every 1000 steps here, and an inf step now and then so that the taken and
// enqueued counts differ), and every record's rate and the final weights stay the CPU's, bit for bit.
TEST(FusedOptimizerTest, LongRunsRebaseTheScalarTableWithGroups) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = AdamScenario(true, false, Dynamic(1024.0, 1000));
  sc.numels = {5, 3, 2, 4, 1};
  sc.batch = 3;
  sc.options.groups = ThreeGroups();
  sc.options.schedule = Cosine(9500);
  const int kSteps = 9000;
  Lockstep run(sc, 12);
  ASSERT_TRUE(run.ok());
  std::vector<FusedStepRecord> cpu_records, gpu_records;
  for (int step = 1; step <= kSteps; ++step) {
    cpu_records.push_back(run.Step(step, [&](std::vector<std::vector<float>>& g) {
      if (step % 777 == 0) g[2][1] = std::numeric_limits<float>::infinity();
    }));
    if (step % 1000 == 0 || step == kSteps) {
      StatusOr<std::vector<FusedStepRecord>> drained = run.gpu().Drain();
      ASSERT_TRUE(drained.ok()) << drained.status().message();
      gpu_records.insert(gpu_records.end(), drained->begin(), drained->end());
    }
  }
  ASSERT_EQ(gpu_records.size(), static_cast<size_t>(kSteps));
  for (int k = 0; k < kSteps; ++k) {
    ASSERT_EQ(gpu_records[k].skipped, cpu_records[k].skipped) << k;
    ASSERT_EQ(gpu_records[k].lr, cpu_records[k].lr) << k;
  }
  EXPECT_EQ(run.gpu().steps_taken(), run.cpu().steps_taken);
  run.ExpectSameParameters();
}

// SetSchedule between steps (a plateau's reduction) with parameter groups: the steps after it take the new rates in
// every group's column, as a CPU optimizer given the new schedule's rates.
TEST(FusedOptimizerTest, SetScheduleRebuildsEveryGroupsColumn) {
  REQUIRE_CUDA_DEVICE();
  Scenario sc = AdamScenario(true, false, Disabled());
  sc.options.groups = ThreeGroups();
  sc.options.schedule = LrScheduleOptions();
  sc.options.schedule.kind = LrScheduleKind::kPlateau;
  sc.options.schedule.base_lr = 1e-2;
  sc.options.schedule.patience = 0;
  sc.options.schedule.gamma = 0.5;
  Lockstep run(sc, 13);
  ASSERT_TRUE(run.ok());
  for (int step = 1; step <= 6; ++step) {
    if (step == 4) {  // two evaluations, the second no better: the rate halves for steps 4-6
      ASSERT_FALSE(run.cpu().schedule->ReportMetric(1.0));
      ASSERT_TRUE(run.cpu().schedule->ReportMetric(2.0));
      ASSERT_TRUE(run.gpu().SetSchedule(*run.cpu().schedule).ok());
    }
    run.Step(step);
  }
  StatusOr<std::vector<FusedStepRecord>> records = run.gpu().Drain();
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 6u);
  for (int k = 0; k < 6; ++k) EXPECT_EQ((*records)[k].lr, k < 3 ? 1e-2 : 5e-3) << k;
  run.ExpectSameParameters();
}

// A non-finite norm of finite gradients (the float32 sum of squares overflows): no update, and the record says so.
TEST(FusedOptimizerTest, NormOverflowIsReportedAndNotApplied) {
  REQUIRE_CUDA_DEVICE();
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreate(&stream));
  FusedOptimizerOptions o;
  o.kind = FusedOptimizerKind::kSgd;
  o.scaler = Disabled();
  o.clip_norm = 1.0;
  StatusOr<std::unique_ptr<FusedOptimizer>> created = FusedOptimizer::Create(o, {4}, stream);
  ASSERT_TRUE(created.ok()) << created.status().message();
  const std::vector<float> p = {1, 2, 3, 4};
  ASSERT_TRUE((*created)->LoadParam(0, p.data()).ok());
  DeviceBuffers dev;
  float* g = dev.Floats(4);
  const std::vector<float> big(4, 3e38f);
  CUDA_OK(cudaMemcpy(g, big.data(), sizeof(float) * 4, cudaMemcpyHostToDevice));
  ASSERT_TRUE((*created)->Step({g}).ok());
  // Reported in the step's record (Trainer::Drain turns it into the run's error, after the steps before it).
  StatusOr<std::vector<FusedStepRecord>> records = (*created)->Drain();
  ASSERT_TRUE(records.ok()) << records.status().message();
  ASSERT_EQ(records->size(), 1u);
  EXPECT_TRUE((*records)[0].norm_error);
  EXPECT_TRUE((*records)[0].skipped);
  // found_inf says "skipped" to what follows the step (the running statistics' commit): set by a norm error too.
  int32_t skipped_flag = -1;
  CUDA_OK(cudaMemcpy(&skipped_flag, (*created)->found_inf(), sizeof(skipped_flag), cudaMemcpyDeviceToHost));
  EXPECT_EQ(skipped_flag, 1);
  std::vector<float> after(4);
  ASSERT_TRUE((*created)->ReadParam(0, after.data()).ok());
  EXPECT_EQ(after, p);
  EXPECT_EQ((*created)->steps_taken(), 0);
  created->reset();
  CUDA_OK(cudaStreamDestroy(stream));
}

// A parameter with a gradient overflow threshold (the FP16 range of a gradient the unfused graph rounds to FP16):
// a finite gradient at or above it skips the step like inf, below it the step is taken; a parameter without one
// takes the same gradient. With accumulation, each micro-batch's gradient is compared, not their sum.
TEST(FusedOptimizerTest, GradientsBeyondTheirOverflowThresholdSkipTheStep) {
  REQUIRE_CUDA_DEVICE();
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreate(&stream));
  for (const int accumulate : {1, 3}) {
    for (const bool limited : {true, false}) {
      FusedOptimizerOptions o;
      o.kind = FusedOptimizerKind::kSgd;
      o.scaler = Static(65536.0);
      o.accumulate = accumulate;
      if (limited) o.gradient_overflow_at = {0.0f, kFp16OverflowMagnitude};
      StatusOr<std::unique_ptr<FusedOptimizer>> created = FusedOptimizer::Create(o, {4, 4}, stream);
      ASSERT_TRUE(created.ok()) << created.status().message();
      FusedOptimizer& gpu = **created;
      DeviceBuffers dev;
      float* small = dev.Floats(4);
      float* big = dev.Floats(4);
      const std::vector<float> s = {1, -2, 3, 65000}, b = {1, -2, 3, -65520};
      CUDA_OK(cudaMemcpy(small, s.data(), sizeof(float) * 4, cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(big, b.data(), sizeof(float) * 4, cudaMemcpyHostToDevice));
      // Step 1: below the threshold everywhere (with accumulation the sum goes past it: still taken). Step 2: the
      // limited parameter's gradient reaches it. Step 3: only the unlimited parameter's does.
      const std::vector<std::vector<const float*>> steps = {{small, small}, {small, big}, {big, small}};
      for (const std::vector<const float*>& grads : steps) {
        if (accumulate == 1) {
          ASSERT_TRUE(gpu.Step(grads).ok());
        } else {
          for (int m = 0; m < accumulate; ++m) ASSERT_TRUE(gpu.Accumulate(m == 1 ? grads : steps[0]).ok());
          ASSERT_TRUE(gpu.Step({}).ok());
        }
      }
      StatusOr<std::vector<FusedStepRecord>> records = gpu.Drain();
      ASSERT_TRUE(records.ok()) << records.status().message();
      ASSERT_EQ(records->size(), 3u);
      const std::string what = "accumulate " + std::to_string(accumulate) + (limited ? " limited" : " unlimited");
      EXPECT_FALSE((*records)[0].skipped) << what;
      EXPECT_EQ((*records)[1].skipped, limited) << what;
      EXPECT_FALSE((*records)[2].skipped) << what;
    }
  }
  CUDA_OK(cudaStreamDestroy(stream));
}

// ---- Host-side tests (no GPU) ----------------------------------------------------------------------------------

TEST(FusedOptimizerPlanTest, ChunksCoverEveryElementOnce) {
  const std::vector<int64_t> numels = {10, 0, 25, 16, 7};
  StatusOr<FusedLayout> layout = PlanFusedLayout(numels, 8);
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  EXPECT_EQ(layout->offsets, (std::vector<int64_t>{0, 16, 16, 48, 64}));
  EXPECT_EQ(layout->flat_size, 80);
  EXPECT_EQ(layout->chunk_begin, (std::vector<int32_t>{0, 2, 2, 6, 8, 9}));
  std::vector<int> covered(layout->flat_size, 0);
  for (size_t i = 0; i < numels.size(); ++i) {
    int64_t next = 0;
    for (int32_t k = layout->chunk_begin[i]; k < layout->chunk_begin[i + 1]; ++k) {
      const FusedChunk& c = layout->chunks[k];
      EXPECT_EQ(c.param, static_cast<int32_t>(i));
      EXPECT_EQ(c.start, next);
      EXPECT_GT(c.length, 0);
      EXPECT_LE(c.length, 8);
      EXPECT_EQ(c.flat, layout->offsets[i] + c.start);
      for (int32_t j = 0; j < c.length; ++j) ++covered[c.flat + j];
      next += c.length;
    }
    EXPECT_EQ(next, numels[i]);
    EXPECT_EQ(layout->offsets[i] % kFusedAlignmentElements, 0);
  }
  int total = 0;
  for (int c : covered) {
    EXPECT_LE(c, 1);
    total += c;
  }
  EXPECT_EQ(total, 10 + 25 + 16 + 7);
  EXPECT_FALSE(PlanFusedLayout({4, -1}).ok());
  EXPECT_FALSE(PlanFusedLayout({4}, 0).ok());
}

// Per-parameter overflow thresholds: carried by every chunk of their parameter, refused when malformed; and chosen
// from the train graph: under FP16 AMP every parameter of the bundled mlp has its gradient cast from FP16 (the FP16
// range applies), in FP32 none has.
TEST(FusedOptimizerPlanTest, OverflowThresholdsComeFromTheCastsOfFp16Gradients) {
  StatusOr<FusedLayout> layout = PlanFusedLayout({10, 3}, 4, {0.0f, kFp16OverflowMagnitude});
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  for (const FusedChunk& c : layout->chunks) EXPECT_EQ(c.overflow_at, c.param == 1 ? kFp16OverflowMagnitude : 0.0f);
  EXPECT_FALSE(PlanFusedLayout({10, 3}, 4, {1.0f}).ok());
  EXPECT_FALSE(PlanFusedLayout({10}, 4, {-1.0f}).ok());
  EXPECT_FALSE(PlanFusedLayout({10}, 4, {std::numeric_limits<float>::quiet_NaN()}).ok());

  for (const DType amp : {DType::kFloat16, DType::kUndefined}) {
    StatusOr<ir::Model> model = importer::LoadModel(test_util::ReferenceModelsDir() + "/mlp.onnx");
    ASSERT_TRUE(model.ok()) << model.status().message();
    TrainingGraphOptions options;
    options.loss.kind = LossKind::kMse;
    options.amp = amp;
    StatusOr<TrainingGraphs> graphs = BuildTrainingGraphs(*model, options);
    ASSERT_TRUE(graphs.ok()) << graphs.status().message();
    const std::vector<float> at = Fp16GradientOverflowThresholds(*graphs->train.graph, graphs->params);
    ASSERT_EQ(at.size(), graphs->params.size());
    ASSERT_EQ(at.size(), 4u);  // two weights, two biases
    for (size_t i = 0; i < at.size(); ++i) {
      EXPECT_EQ(at[i], amp == DType::kFloat16 ? kFp16OverflowMagnitude : 0.0f) << graphs->params[i].name;
    }
  }
}

TEST(FusedOptimizerPlanTest, StepScalarsAreTheCpuOptimizersScalars) {
  FusedOptimizerOptions o;
  o.schedule = Cosine(20);
  StatusOr<LrSchedule> schedule = LrSchedule::Create(o.schedule);
  ASSERT_TRUE(schedule.ok());
  o.kind = FusedOptimizerKind::kAdamW;
  o.adam = AdamWDefaults();
  o.adam.amsgrad = true;
  for (int64_t taken : {0, 1, 7, 19, 25}) {
    const FusedStepScalars s = ComputeFusedStepScalars(o, *schedule, taken);
    EXPECT_EQ(s.lr, schedule->LrAt(taken));
    const optim_math::AdamScalars want =
        optim_math::ComputeAdamScalars(s.lr, 0.9, 0.999, 1e-8, 1e-2, true, true, taken + 1);
    EXPECT_EQ(Bits(s.adam.neg_step_size), Bits(want.neg_step_size)) << taken;
    EXPECT_EQ(Bits(s.adam.bias_correction2_sqrt), Bits(want.bias_correction2_sqrt)) << taken;
    EXPECT_EQ(Bits(s.adam.decay_factor), Bits(want.decay_factor)) << taken;
    EXPECT_TRUE(s.adam.decoupled && s.adam.amsgrad);
  }
  o.kind = FusedOptimizerKind::kSgd;
  o.sgd.momentum = 0.9;
  o.sgd.dampening = 0.1;
  o.sgd.weight_decay = 1e-4;
  const FusedStepScalars s = ComputeFusedStepScalars(o, *schedule, 3);
  EXPECT_EQ(Bits(s.sgd.neg_lr), Bits(static_cast<float>(-schedule->LrAt(3))));
  EXPECT_EQ(Bits(s.sgd.one_minus_dampening), Bits(static_cast<float>(1.0 - 0.1)));
  EXPECT_EQ(Bits(s.sgd.momentum), Bits(0.9f));
  EXPECT_TRUE(s.sgd.has_momentum && s.sgd.has_weight_decay && !s.sgd.nesterov);
}

TEST(FusedOptimizerPlanTest, RmspropAdagradAndLionScalarsAreTheCpuOptimizersScalars) {
  FusedOptimizerOptions o;
  o.schedule = Cosine(20);
  StatusOr<LrSchedule> schedule = LrSchedule::Create(o.schedule);
  ASSERT_TRUE(schedule.ok());
  o.kind = FusedOptimizerKind::kRmsprop;
  o.rmsprop.alpha = 0.95;
  o.rmsprop.momentum = 0.5;
  o.rmsprop.centered = true;
  o.rmsprop.weight_decay = 1e-3;
  const ParamGroup half{0.5, false};
  for (int64_t taken : {0, 7, 25}) {
    const double lr = schedule->LrAt(taken);
    const FusedStepScalars s = ComputeFusedStepScalars(o, *schedule, taken);
    const FusedStepScalars g = ComputeFusedStepScalars(o, *schedule, taken, half);
    EXPECT_EQ(Bits(s.rmsprop.neg_lr), Bits(static_cast<float>(-lr))) << taken;
    EXPECT_EQ(Bits(g.rmsprop.neg_lr), Bits(static_cast<float>(-(lr * 0.5)))) << taken;
    EXPECT_TRUE(s.rmsprop.has_weight_decay && s.rmsprop.centered && s.rmsprop.has_momentum);
    EXPECT_FALSE(g.rmsprop.has_weight_decay);
  }
  const FusedStepScalars r = ComputeFusedStepScalars(o, *schedule, 2);
  EXPECT_EQ(Bits(r.rmsprop.one_minus_alpha), Bits(static_cast<float>(1.0 - 0.95)));
  EXPECT_EQ(Bits(r.rmsprop.alpha), Bits(0.95f));
  EXPECT_EQ(Bits(r.rmsprop.weight_decay), Bits(1e-3f));
  o.kind = FusedOptimizerKind::kLion;
  o.lion.weight_decay = 0.1;
  for (int64_t taken : {0, 7, 25}) {
    const double lr = schedule->LrAt(taken);
    const FusedStepScalars s = ComputeFusedStepScalars(o, *schedule, taken);
    const FusedStepScalars g = ComputeFusedStepScalars(o, *schedule, taken, half);
    EXPECT_EQ(Bits(s.lion.neg_lr), Bits(static_cast<float>(-lr))) << taken;
    EXPECT_EQ(Bits(s.lion.decay_factor), Bits(static_cast<float>(1.0 - lr * 0.1))) << taken;
    EXPECT_EQ(Bits(g.lion.neg_lr), Bits(static_cast<float>(-(lr * 0.5)))) << taken;
    EXPECT_FALSE(g.lion.has_weight_decay);
    EXPECT_EQ(g.lion.decay_factor, 1.0f);
  }
  o.kind = FusedOptimizerKind::kAdagrad;
  o.adagrad.lr_decay = 0.25;
  o.adagrad.initial_accumulator_value = 0.1;
  for (int64_t taken : {0, 7, 25}) {
    const double lr = schedule->LrAt(taken);
    const optim_math::AdagradScalars want = optim_math::ComputeAdagradScalars(lr, 0.25, 0.0, 0.1, 1e-10, taken + 1);
    const FusedStepScalars a = ComputeFusedStepScalars(o, *schedule, taken);
    EXPECT_EQ(Bits(a.adagrad.neg_clr), Bits(want.neg_clr)) << taken;
    EXPECT_EQ(Bits(a.adagrad.initial), Bits(0.1f));
  }
  o.kind = FusedOptimizerKind::kRadam;
  o.radam.beta2 = 0.9;
  for (int64_t taken : {0, 4, 5, 25}) {
    const optim_math::RadamScalars want =
        optim_math::ComputeRadamScalars(schedule->LrAt(taken), 0.9, 0.9, 1e-8, 0.0, taken + 1);
    const FusedStepScalars r2 = ComputeFusedStepScalars(o, *schedule, taken);
    EXPECT_EQ(r2.radam.rectified, want.rectified) << taken;
    EXPECT_EQ(Bits(r2.radam.rect), Bits(want.rect)) << taken;
    EXPECT_EQ(Bits(r2.radam.bias_correction1), Bits(want.bias_correction1)) << taken;
  }
  o.kind = FusedOptimizerKind::kLion;
  const FusedStepScalars l = ComputeFusedStepScalars(o, *schedule, 2);
  EXPECT_EQ(Bits(l.lion.one_minus_beta1), Bits(static_cast<float>(1.0 - 0.9)));
  EXPECT_EQ(Bits(l.lion.one_minus_beta2), Bits(static_cast<float>(1.0 - 0.99)));
}

TEST(FusedOptimizerPlanTest, GroupScalarsScaleTheRateAndDropTheDecay) {
  FusedOptimizerOptions o;
  o.schedule = Cosine(20);
  StatusOr<LrSchedule> schedule = LrSchedule::Create(o.schedule);
  ASSERT_TRUE(schedule.ok());
  o.kind = FusedOptimizerKind::kAdamW;
  o.adam = AdamWDefaults();
  const ParamGroup head{10.0, true}, bias{0.25, false};
  for (int64_t taken : {0, 5, 19}) {
    const double lr = schedule->LrAt(taken);
    const FusedStepScalars h = ComputeFusedStepScalars(o, *schedule, taken, head);
    const FusedStepScalars b = ComputeFusedStepScalars(o, *schedule, taken, bias);
    EXPECT_EQ(h.lr, lr);  // the record's rate is the schedule's, in every group
    EXPECT_EQ(b.lr, lr);
    const optim_math::AdamScalars want_h =
        optim_math::ComputeAdamScalars(lr * 10.0, 0.9, 0.999, 1e-8, 1e-2, true, false, taken + 1);
    const optim_math::AdamScalars want_b =
        optim_math::ComputeAdamScalars(lr * 0.25, 0.9, 0.999, 1e-8, 0.0, true, false, taken + 1);
    EXPECT_EQ(Bits(h.adam.neg_step_size), Bits(want_h.neg_step_size)) << taken;
    EXPECT_EQ(Bits(h.adam.decay_factor), Bits(want_h.decay_factor)) << taken;
    EXPECT_TRUE(h.adam.has_weight_decay);
    EXPECT_EQ(Bits(b.adam.neg_step_size), Bits(want_b.neg_step_size)) << taken;
    EXPECT_FALSE(b.adam.has_weight_decay);
    EXPECT_EQ(b.adam.decay_factor, 1.0f);
  }
  EXPECT_EQ(ComputeFusedStepScalars(o, *schedule, 4, head).ema_weight, 0.0f);  // no average kept
  o.ema_decay = 0.99;
  o.ema_warmup = true;
  for (int64_t taken : {0, 4, 200}) {
    EXPECT_EQ(Bits(ComputeFusedStepScalars(o, *schedule, taken, bias).ema_weight),
              Bits(optim_math::EmaWeight(0.99, true, taken)));
  }
  o.ema_decay = 0;
  o.ema_warmup = false;
  o.swa_start = 2;  // stochastic weight averaging: 0 before, then 1, 1/2, 1/3, ...
  const float swa[] = {0.0f, 0.0f, 1.0f, 0.5f, static_cast<float>(1.0 / 3.0)};
  for (int64_t taken = 0; taken < 5; ++taken) {
    EXPECT_EQ(Bits(ComputeFusedStepScalars(o, *schedule, taken, bias).ema_weight), Bits(swa[taken])) << taken;
  }
  o.swa_start = -1;
  o.kind = FusedOptimizerKind::kSgd;
  o.sgd.weight_decay = 1e-4;
  const FusedStepScalars s = ComputeFusedStepScalars(o, *schedule, 3, bias);
  EXPECT_EQ(Bits(s.sgd.neg_lr), Bits(static_cast<float>(-(schedule->LrAt(3) * 0.25))));
  EXPECT_FALSE(s.sgd.has_weight_decay);

  StatusOr<FusedLayout> layout = PlanFusedLayout({10, 3}, 4, {}, {0, 2});
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  for (const FusedChunk& c : layout->chunks) EXPECT_EQ(c.group, c.param == 0 ? 0 : 2);
  EXPECT_FALSE(PlanFusedLayout({10, 3}, 4, {}, {0}).ok());
  EXPECT_FALSE(PlanFusedLayout({10}, 4, {}, {-1}).ok());
}

TEST(FusedOptimizerPlanTest, CreateRejectsInvalidOptions) {
  auto rejects = [](const FusedOptimizerOptions& o, const std::string& what) {
    StatusOr<std::unique_ptr<FusedOptimizer>> r = FusedOptimizer::Create(o, {4}, nullptr);
    EXPECT_FALSE(r.ok()) << what;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << what << ": " << r.status().message();
    }
  };
  FusedOptimizerOptions o;
  o.adam.beta1 = 1.0;
  rejects(o, "beta1 = 1");
  o = FusedOptimizerOptions();
  o.kind = FusedOptimizerKind::kSgd;
  o.sgd.nesterov = true;
  rejects(o, "Nesterov without momentum");
  o = FusedOptimizerOptions();
  o.scaler.growth_factor = 1.0;
  rejects(o, "growth_factor = 1");
  o = FusedOptimizerOptions();
  o.scaler.min_scale = 1e9;
  rejects(o, "min_scale above init_scale");
  o = FusedOptimizerOptions();
  o.clip_norm = -1;
  rejects(o, "negative clip_norm");
  o = FusedOptimizerOptions();
  o.accumulate = 0;
  rejects(o, "accumulate = 0");
  o = FusedOptimizerOptions();
  o.low_precision = DType::kFloat64;
  rejects(o, "float64 copies");
  o = FusedOptimizerOptions();
  o.schedule.base_lr = -1;
  rejects(o, "negative lr");
  o = FusedOptimizerOptions();
  o.ema_decay = 1.0;
  rejects(o, "ema_decay = 1");
  o.ema_decay = 0.5;
  o.swa_start = 2;
  rejects(o, "swa_start with ema_decay");
  o.ema_decay = 0;
  o.swa_start = -3;
  rejects(o, "swa_start = -3");
  o = FusedOptimizerOptions();
  o.groups.of = {0, 0};
  rejects(o, "groups for 2 parameters of 1");
  o = FusedOptimizerOptions();
  o.groups.of = {1};
  rejects(o, "group 1 of 1");
  o = FusedOptimizerOptions();
  o.groups.groups.push_back(ParamGroup{std::numeric_limits<double>::infinity(), true});
  o.groups.of = {1};
  rejects(o, "infinite lr_scale");
  StatusOr<std::unique_ptr<FusedOptimizer>> r = FusedOptimizer::Create(FusedOptimizerOptions(), {3, -2}, nullptr);
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace onnxamp::trainer::cuda
