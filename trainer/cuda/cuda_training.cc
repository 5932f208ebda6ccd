#include "trainer/cuda/cuda_training.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "converter/model_clone.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/executor/device_context.h"
#include "runtime/executor/session.h"
#include "trainer/cuda/data_kernels.h"
#include "trainer/cuda/fused_optimizer.h"
#include "trainer/device_training.h"
#include "trainer/graph/weight_casts.h"
#include "trainer/trainer.h"

namespace onnxamp::trainer::cuda {
namespace {

FusedOptimizerKind KindOf(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::kSgd:
      return FusedOptimizerKind::kSgd;
    case OptimizerKind::kAdam:
      return FusedOptimizerKind::kAdam;
    case OptimizerKind::kAdamW:
      break;
  }
  return FusedOptimizerKind::kAdamW;
}

// A device tensor over memory that `owner` keeps alive (the session never frees or writes its inputs).
ir::Tensor DeviceView(DType dtype, const std::vector<int64_t>& dims, const void* data, std::shared_ptr<void> owner,
                      const std::string& name) {
  StatusOr<size_t> bytes = ir::Tensor::ComputeByteSize(dtype, dims);
  ONNXAMP_CHECK(bytes.ok(), bytes.status().message());
  auto buffer = std::make_shared<ir::Buffer>(static_cast<std::byte*>(const_cast<void*>(data)), *bytes, std::move(owner),
                                             ir::MemoryKind::kCuda);
  ir::Tensor t = ir::Tensor::FromBuffer(dtype, dims, std::move(buffer));
  t.set_name(name);
  return t;
}

// Index lists of the batches on their way to the device: pinned host slots copied asynchronously into device slots,
// each slot reused only after the work that read it (an event) has finished.
class IndexRing {
 public:
  static constexpr int kSlots = 32;

  ~IndexRing() {
    for (cudaEvent_t e : events_) {
      if (e) cudaEventDestroy(e);
    }
    if (host_) cudaFreeHost(host_);
    if (device_) cudaFree(device_);
  }

  Status Init(int64_t max_rows) {
    capacity_ = std::max<int64_t>(max_rows, 1);
    const size_t bytes = static_cast<size_t>(capacity_) * kSlots * sizeof(int64_t);
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&host_, bytes, cudaHostAllocDefault), "pinned index buffer");
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMalloc(&device_, bytes), "device index buffer");
    events_.assign(kSlots, nullptr);
    for (cudaEvent_t& e : events_) {
      ONNXAMP_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "index event");
    }
    used_.assign(kSlots, false);
    return Status::Ok();
  }

  // Copies `indices` into the next slot; returns its device address (valid until Release of that slot).
  StatusOr<const int64_t*> Upload(const std::vector<int64_t>& indices, cudaStream_t stream) {
    if (static_cast<int64_t>(indices.size()) > capacity_) {
      return Internal("a batch of ", indices.size(), " rows where at most ", capacity_, " were planned");
    }
    slot_ = (slot_ + 1) % kSlots;
    if (used_[slot_]) ONNXAMP_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(events_[slot_]), "index ring");
    int64_t* h = host_ + slot_ * capacity_;
    int64_t* d = device_ + slot_ * capacity_;
    std::memcpy(h, indices.data(), indices.size() * sizeof(int64_t));
    ONNXAMP_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(d, h, indices.size() * sizeof(int64_t), cudaMemcpyHostToDevice, stream), "index upload");
    return static_cast<const int64_t*>(d);
  }
  // Marks the current slot as read by the work queued so far on `stream`.
  Status Release(cudaStream_t stream) {
    used_[slot_] = true;
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[slot_], stream), "index ring event");
    return Status::Ok();
  }

 private:
  int64_t capacity_ = 0;
  int64_t* host_ = nullptr;
  int64_t* device_ = nullptr;
  std::vector<cudaEvent_t> events_;
  std::vector<bool> used_;
  int slot_ = kSlots - 1;
};

class CudaTraining final : public DeviceTraining {
 public:
  static StatusOr<std::unique_ptr<DeviceTraining>> Create(const TrainerOptions& options, const TrainingGraphs& graphs,
                                                          const Dataset& train);

  std::string Describe() const override { return description_; }
  Status Step(const std::vector<std::vector<int64_t>>& micro_batches, uint64_t rng_step) override;
  StatusOr<std::vector<DeviceStepResult>> Drain() override;
  StatusOr<std::vector<ir::Tensor>> EvalBatch(const std::vector<ir::Tensor>& batch) override;
  Status Download(ParameterStore* store, std::vector<ir::Tensor>* buffers, std::optional<GradScalerState>* scaler,
                  int64_t* steps_taken) override;
  Status Upload(const ParameterStore& store, const std::vector<ir::Tensor>& buffers,
                const std::optional<GradScalerState>& scaler, int64_t steps_done, int64_t steps_taken,
                int64_t skipped) override;
  uint64_t peak_device_bytes() const override;
  void SetProfile(StepProfile* profile) override { profile_ = profile; }

 private:
  CudaTraining(const TrainerOptions& options, const TrainingGraphs& graphs, const Dataset& train)
      : options_(options), graphs_(graphs), train_(train) {}

  // The batch's arrays (data inputs, then the labels), on the device when the data are.
  StatusOr<std::vector<ir::Tensor>> Batch(const std::vector<int64_t>& indices);
  // Parameter views, low-precision views, the given buffers.
  void AddStateFeeds(bool eval, const std::vector<ir::Tensor>& buffers, std::vector<ir::Tensor>* feeds) const;

  TrainerOptions options_;
  const TrainingGraphs& graphs_;
  const Dataset& train_;
  std::unique_ptr<exec::Session> train_session_;
  std::unique_ptr<exec::Session> eval_session_;
  onnxamp::cuda::CudaContext* context_ = nullptr;  // the train session's
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<FusedOptimizer> optimizer_;
  exec::RunOptions train_run_;  // fetch: the loss, every gradient, the updated buffers; outputs left on the device
  ir::Tensor seed_;             // the loss_scale input: a view of the optimizer's device seed
  std::vector<LowPrecisionWeight> train_low_, eval_low_;
  std::vector<ir::Tensor> params_;     // FP32 master views, named after the parameters
  std::vector<ir::Tensor> low_views_;  // per parameter: its low-precision view (empty without AMP)
  std::vector<ir::Tensor> committed_;  // committed buffers on the device, named after the buffers
  // The training data on the device (one buffer per bound array), or empty when it is fed from the host.
  std::vector<std::shared_ptr<ir::Buffer>> device_data_;
  uint64_t device_data_bytes_ = 0;
  IndexRing indices_;
  uint64_t state_bytes_ = 0;
  std::string description_;
  StepProfile* profile_ = nullptr;  // profiling the steps (SetProfile)
};

StatusOr<std::unique_ptr<DeviceTraining>> CudaTraining::Create(const TrainerOptions& options,
                                                               const TrainingGraphs& graphs, const Dataset& train) {
  if (!onnxamp::cuda::RegisterCudaBackend()) return FailedPrecondition("--device cuda: no usable CUDA device");
  std::unique_ptr<CudaTraining> t(new CudaTraining(options, graphs, train));
  ir::Model train_model = converter::CloneModel(graphs.train);
  ir::Model eval_model = converter::CloneModel(graphs.eval);
  const DType low = options.graph.amp;
  // The forward passes read the optimizer's low-precision weight copies instead of casting the masters every step.
  t->train_low_ = ExternalizeWeightCasts(train_model, graphs.params, low);
  t->eval_low_ = ExternalizeWeightCasts(eval_model, graphs.params, low);

  exec::SessionOptions session;
  session.device = exec::Device::kCuda;
  session.device_index = options.device_index;
  session.num_threads = options.threads;
  session.seed = options.seed;
  exec::SessionOptions train_options = session;
  train_options.mode = exec::SessionMode::kTraining;
  StatusOr<std::unique_ptr<exec::Session>> ts = exec::Session::Create(std::move(train_model), train_options);
  if (!ts.ok()) return ts.status().WithContext("the training graph on CUDA");
  t->train_session_ = std::move(ts).value();
  StatusOr<std::unique_ptr<exec::Session>> es = exec::Session::Create(std::move(eval_model), session);
  if (!es.ok()) return es.status().WithContext("the evaluation graph on CUDA");
  t->eval_session_ = std::move(es).value();
  t->context_ = dynamic_cast<onnxamp::cuda::CudaContext*>(t->train_session_->device_context());
  if (!t->context_) return Internal("the training session has no CUDA context");
  t->stream_ = t->context_->stream();

  FusedOptimizerOptions fo;
  fo.kind = KindOf(options.optimizer);
  fo.sgd = options.sgd;
  fo.adam = options.adam;
  fo.schedule = options.schedule;
  fo.scaler = options.scaler;
  fo.clip_norm = options.clip_norm;
  fo.accumulate = options.accumulate;
  fo.low_precision = t->train_low_.empty() && t->eval_low_.empty() ? DType::kUndefined : low;
  fo.device_index = options.device_index;
  std::vector<int64_t> numels;
  for (const Parameter& p : graphs.params) numels.push_back(p.initial.num_elements());
  StatusOr<std::unique_ptr<FusedOptimizer>> opt = FusedOptimizer::Create(fo, numels, t->stream_);
  if (!opt.ok()) return opt.status().WithContext("the CUDA optimizer");
  t->optimizer_ = std::move(opt).value();
  t->seed_ = DeviceView(DType::kFloat32, {}, t->optimizer_->seed(), t->optimizer_, graphs.loss_scale);
  t->train_run_.fetch = {graphs.loss};
  for (const Parameter& p : graphs.params) t->train_run_.fetch.push_back(p.gradient);
  for (const Buffer& b : graphs.buffers) {
    if (!b.updated.empty()) t->train_run_.fetch.push_back(b.updated);
  }
  t->train_run_.outputs_on_device = true;
  t->train_run_.synchronize = false;
  uint64_t elements = 0;
  for (int64_t n : numels) elements += static_cast<uint64_t>(n);
  t->state_bytes_ = elements * (4 + 4 * t->optimizer_->state_names().size() +
                                (fo.low_precision == DType::kUndefined ? 0 : 2) + (options.accumulate > 1 ? 4 : 0));
  for (size_t i = 0; i < graphs.params.size(); ++i) {
    const Parameter& p = graphs.params[i];
    ONNXAMP_RETURN_IF_ERROR(t->optimizer_->LoadParam(i, p.initial.values<float>().data()));
    t->params_.push_back(DeviceView(DType::kFloat32, p.initial.dims(), t->optimizer_->param(i), t->optimizer_, p.name));
    t->low_views_.emplace_back();
  }
  auto add_low = [&](const std::vector<LowPrecisionWeight>& list) {
    for (const LowPrecisionWeight& w : list) {
      const Parameter& p = graphs.params[w.param];
      t->low_views_[w.param] =
          DeviceView(low, p.initial.dims(), t->optimizer_->low_precision(w.param), t->optimizer_, w.input);
    }
  };
  add_low(t->train_low_);
  add_low(t->eval_low_);
  for (const Buffer& b : graphs.buffers) {
    ir::Tensor v = b.initial;
    v.set_name(b.name);
    StatusOr<ir::Tensor> d = t->train_session_->ToDevice(v);
    if (!d.ok()) return d.status().WithContext(StrCat("buffer ", b.name));
    // ToDevice shares nothing with later runs; the commit kernel writes this copy in place.
    t->committed_.push_back(std::move(d).value());
  }

  // The training data: on the device when it takes at most a quarter of the device's memory.
  uint64_t data_bytes = 0;
  for (const ir::Tensor& a : train.arrays()) data_bytes += a.nbytes();
  const uint64_t total = t->context_->total_memory_bytes();
  bool on_device = total == 0 || data_bytes <= total / 4;
  for (const ir::Tensor& a : train.arrays()) on_device = on_device && a.dtype() != DType::kString;
  if (on_device) {
    for (const ir::Tensor& a : train.arrays()) {
      StatusOr<std::shared_ptr<ir::Buffer>> buf = t->context_->Allocate(std::max<size_t>(a.nbytes(), 1));
      if (!buf.ok()) return buf.status().WithContext(StrCat("uploading the training array '", a.name(), "'"));
      if (a.nbytes()) {
        ONNXAMP_RETURN_IF_ERROR(t->context_->CopyHostToDevice(a.data(), (*buf)->data(), a.nbytes()));
      }
      t->device_data_.push_back(std::move(buf).value());
    }
    ONNXAMP_RETURN_IF_ERROR(t->context_->Synchronize());
    t->device_data_bytes_ = data_bytes;
    ONNXAMP_RETURN_IF_ERROR(t->indices_.Init(options.batch_size));
  }
  const exec::Placement& placement = t->train_session_->placement();
  t->description_ = StrCat(
      t->context_->Describe(), "; ", placement.nodes, " training-graph nodes, ", placement.on_cpu.size(),
      " of them on the CPU; training data ",
      on_device ? StrCat("on the device (", data_bytes >> 20, " MiB)") : std::string("fed from the host per batch"));
  if (!placement.on_cpu.empty()) {
    std::string names;
    for (size_t i = 0; i < placement.on_cpu.size() && i < 8; ++i) names += (i ? ", " : " (") + placement.on_cpu[i];
    t->description_ += names + (placement.on_cpu.size() > 8 ? ", ...)" : ")");
  }
  return std::unique_ptr<DeviceTraining>(std::move(t));
}

StatusOr<std::vector<ir::Tensor>> CudaTraining::Batch(const std::vector<int64_t>& indices) {
  if (device_data_.empty()) return MakeBatch(train_, indices);
  // The arrays on the device are whole: a view's samples (a --val-split part) go through its rows.
  ONNXAMP_ASSIGN_OR_RETURN(const int64_t* d_indices, indices_.Upload(train_.ArrayRows(indices), stream_));
  std::vector<ir::Tensor> out;
  const int64_t rows = static_cast<int64_t>(indices.size());
  for (size_t k = 0; k < train_.arrays().size(); ++k) {
    const ir::Tensor& a = train_.arrays()[k];
    const int64_t n = a.dims().empty() ? 1 : a.dims()[0];
    const size_t row_bytes = n > 0 ? a.nbytes() / static_cast<size_t>(n) : 0;
    std::vector<int64_t> dims = a.dims();
    dims[0] = rows;
    StatusOr<std::shared_ptr<ir::Buffer>> buf = context_->Allocate(std::max<size_t>(row_bytes * rows, 1));
    if (!buf.ok()) return buf.status().WithContext(StrCat("a batch of '", a.name(), "'"));
    ONNXAMP_RETURN_IF_ERROR(
        GatherRows(device_data_[k]->data(), n, row_bytes, d_indices, rows, (*buf)->data(), stream_));
    ir::Tensor t = ir::Tensor::FromBuffer(a.dtype(), dims, std::move(buf).value());
    t.set_name(a.name());
    out.push_back(std::move(t));
  }
  ONNXAMP_RETURN_IF_ERROR(indices_.Release(stream_));
  return out;
}

void CudaTraining::AddStateFeeds(bool eval, const std::vector<ir::Tensor>& buffers,
                                 std::vector<ir::Tensor>* feeds) const {
  for (const ir::Tensor& p : params_) feeds->push_back(p);
  for (const LowPrecisionWeight& w : eval ? eval_low_ : train_low_) feeds->push_back(low_views_[w.param]);
  for (const ir::Tensor& b : buffers) feeds->push_back(b);
}

Status CudaTraining::Step(const std::vector<std::vector<int64_t>>& micro_batches, uint64_t rng_step) {
  exec::RunOptions& run = train_run_;
  // Profiling: the parts are timed on the host with the stream drained before and after each (profiled runs wait for
  // their events anyway).
  using Clock = std::chrono::steady_clock;
  run.profile = profile_ != nullptr;
  exec::RunStats stats;
  auto drained_since = [&](Clock::time_point t) -> StatusOr<double> {
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_), "profiling the training step");
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  if (profile_) ONNXAMP_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_), "profiling the training step");
  std::vector<ir::Tensor> pending = committed_;
  std::vector<ir::Tensor> outputs;  // the last micro-batch's, alive until the step is queued
  std::vector<const float*> grads(graphs_.params.size());
  for (size_t m = 0; m < micro_batches.size(); ++m) {
    const auto data_start = Clock::now();
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> feeds, Batch(micro_batches[m]));
    if (profile_) {
      ONNXAMP_ASSIGN_OR_RETURN(const double seconds, drained_since(data_start));
      profile_->AddData(seconds);
    }
    if (!graphs_.labels.empty() && !feeds.empty()) feeds.back().set_name(graphs_.labels);
    AddStateFeeds(false, pending, &feeds);
    feeds.push_back(seed_);
    run.rng_step = rng_step + m;
    const auto run_start = Clock::now();
    StatusOr<std::vector<ir::Tensor>> out = train_session_->Run(feeds, run, profile_ ? &stats : nullptr);
    if (!out.ok()) return out.status();
    if (profile_) {
      ONNXAMP_ASSIGN_OR_RETURN(const double seconds, drained_since(run_start));
      profile_->AddRun(stats.nodes, seconds);
    }
    const auto optimizer_start = Clock::now();
    for (size_t i = 0; i < graphs_.params.size(); ++i) {
      const ir::Tensor& g = outputs[1 + i];
      if (g.dtype() != DType::kFloat32 || g.num_elements() != graphs_.params[i].initial.num_elements() || g.on_host()) {
        return Internal("the gradient of '", graphs_.params[i].name, "' is not an FP32 device tensor of its size");
      }
      grads[i] = reinterpret_cast<const float*>(g.data());
    }
    if (outputs[0].on_host() || outputs[0].dtype() != DType::kFloat32) {
      return Internal("the loss is not an FP32 device scalar");
    }
    ONNXAMP_RETURN_IF_ERROR(optimizer_->AddLoss(reinterpret_cast<const float*>(outputs[0].data()),
                                                static_cast<double>(micro_batches[m].size())));
    if (micro_batches.size() > 1) ONNXAMP_RETURN_IF_ERROR(optimizer_->Accumulate(grads));
    size_t k = 1 + graphs_.params.size();
    for (size_t b = 0; b < graphs_.buffers.size(); ++b) {
      if (graphs_.buffers[b].updated.empty()) continue;
      pending[b] = outputs[k++];
      pending[b].set_name(graphs_.buffers[b].name);
    }
    if (profile_) {
      ONNXAMP_ASSIGN_OR_RETURN(const double seconds, drained_since(optimizer_start));
      profile_->AddOptimizer(seconds);
    }
  }
  const auto optimizer_start = Clock::now();
  ONNXAMP_RETURN_IF_ERROR(optimizer_->Step(micro_batches.size() > 1 ? std::vector<const float*>{} : grads));
  for (size_t b = 0; b < committed_.size(); ++b) {
    if (pending[b].buffer() == committed_[b].buffer()) continue;
    ONNXAMP_RETURN_IF_ERROR(CopyIfTaken(optimizer_->found_inf(), pending[b].data(),
                                        const_cast<std::byte*>(committed_[b].data()), committed_[b].nbytes(), stream_));
  }
  if (profile_) {
    ONNXAMP_ASSIGN_OR_RETURN(const double seconds, drained_since(optimizer_start));
    profile_->AddOptimizer(seconds);
  }
  return Status::Ok();
}

StatusOr<std::vector<DeviceStepResult>> CudaTraining::Drain() {
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<DeviceStepResult> records, optimizer_->Drain());
  ONNXAMP_RETURN_IF_ERROR(train_session_->Synchronize());  // also releases the host buffers the runs staged
  return records;
}

StatusOr<std::vector<ir::Tensor>> CudaTraining::EvalBatch(const std::vector<ir::Tensor>& batch) {
  ONNXAMP_RETURN_IF_ERROR(train_session_->Synchronize());
  std::vector<ir::Tensor> feeds = batch;
  if (!graphs_.labels.empty() && !feeds.empty()) feeds.back().set_name(graphs_.labels);
  AddStateFeeds(true, committed_, &feeds);
  exec::RunOptions run;
  run.fetch = {graphs_.loss, graphs_.prediction};
  return eval_session_->Run(feeds, run);
}

Status CudaTraining::Download(ParameterStore* store, std::vector<ir::Tensor>* buffers,
                              std::optional<GradScalerState>* scaler, int64_t* steps_taken) {
  ONNXAMP_RETURN_IF_ERROR(train_session_->Synchronize());
  *steps_taken = optimizer_->steps_taken();
  for (size_t i = 0; i < store->size(); ++i) {
    ir::Tensor t(DType::kFloat32, store->dims(i));
    ONNXAMP_RETURN_IF_ERROR(optimizer_->ReadParam(i, t.mutable_values<float>().data()));
    ONNXAMP_RETURN_IF_ERROR(store->LoadParam(i, t));
  }
  if (*steps_taken > 0) {
    for (const std::string& name : optimizer_->state_names()) {
      float* flat = store->EnsureState(name);
      for (size_t i = 0; i < store->size(); ++i) {
        ONNXAMP_RETURN_IF_ERROR(optimizer_->ReadState(name, i, flat + store->offset(i)));
      }
    }
  }
  buffers->clear();
  for (size_t b = 0; b < committed_.size(); ++b) {
    StatusOr<ir::Tensor> h = train_session_->ToHost(committed_[b]);
    if (!h.ok()) return h.status().WithContext(StrCat("buffer ", graphs_.buffers[b].name));
    ir::Tensor v = std::move(h).value();
    v.set_name(graphs_.buffers[b].name);
    buffers->push_back(std::move(v));
  }
  *scaler = optimizer_->ScalerState();
  return Status::Ok();
}

Status CudaTraining::Upload(const ParameterStore& store, const std::vector<ir::Tensor>& buffers,
                            const std::optional<GradScalerState>& scaler, int64_t steps_done, int64_t steps_taken,
                            int64_t skipped) {
  ONNXAMP_RETURN_IF_ERROR(train_session_->Synchronize());
  for (size_t i = 0; i < store.size(); ++i) {
    const ir::Tensor p = store.ReadParam(i);
    ONNXAMP_RETURN_IF_ERROR(optimizer_->LoadParam(i, p.values<float>().data()));
  }
  for (const std::string& name : store.state_names()) {
    const float* flat = store.FindState(name);
    for (size_t i = 0; i < store.size(); ++i) {
      ONNXAMP_RETURN_IF_ERROR(optimizer_->LoadState(name, i, flat + store.offset(i)));
    }
  }
  if (buffers.size() != committed_.size()) return Internal("buffer count mismatch on upload");
  for (size_t b = 0; b < buffers.size(); ++b) {
    if (buffers[b].nbytes() != committed_[b].nbytes()) {
      return InvalidArgument("buffer '", buffers[b].name(), "' does not match the device's");
    }
    ONNXAMP_RETURN_IF_ERROR(context_->CopyHostToDevice(buffers[b].data(), const_cast<std::byte*>(committed_[b].data()),
                                                       buffers[b].nbytes()));
  }
  if (scaler) ONNXAMP_RETURN_IF_ERROR(optimizer_->RestoreScaler(*scaler));
  ONNXAMP_RETURN_IF_ERROR(optimizer_->RestoreCounters(steps_done, steps_taken, skipped));
  return context_->Synchronize();
}

uint64_t CudaTraining::peak_device_bytes() const {
  uint64_t peak = context_->memory_stats().peak_bytes + state_bytes_;
  if (const exec::DeviceContext* e = eval_session_->device_context()) peak += e->memory_stats().peak_bytes;
  return peak;
}

}  // namespace

bool RegisterCudaTraining() {
  static const bool registered = [] {
    if (!onnxamp::cuda::RegisterCudaBackend()) return false;
    RegisterDeviceTraining(exec::Device::kCuda, &CudaTraining::Create);
    return true;
  }();
  return registered;
}

}  // namespace onnxamp::trainer::cuda
