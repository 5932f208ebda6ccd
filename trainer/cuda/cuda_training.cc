#include "trainer/cuda/cuda_training.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "converter/model_clone.h"
#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/executor/device_context.h"
#include "runtime/executor/session.h"
#include "runtime/ops/gradient_ops.h"
#include "trainer/cuda/data_kernels.h"
#include "trainer/cuda/fused_optimizer.h"
#include "trainer/cuda/fused_optimizer_plan.h"
#include "trainer/device_training.h"
#include "trainer/graph/weight_casts.h"
#include "trainer/step_graph_policy.h"
#include "trainer/trainer.h"

namespace onnxamp::trainer::cuda {
namespace {

std::atomic<bool> fail_captures_for_testing{false};

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

  // The device slots' bytes (after Init).
  size_t device_bytes() const { return static_cast<size_t>(capacity_) * kSlots * sizeof(int64_t); }

  Status Init(int64_t max_rows) {
    capacity_ = std::max<int64_t>(max_rows, 1);
    const size_t bytes = device_bytes();
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

// The captured step's parameter block (CudaTraining::step_params_), int64 values: the RNG step, whether this is the
// step's first micro-batch (accumulation), then the batch's rows.
constexpr int64_t kStepParamsHeader = 2;

// A training step captured as a CUDA Graph: the executable graph(s), and everything their kernels read or write that
// must stay where it is while the graph exists: the blocks allocated while capturing (the run's outputs, the kernels'
// temporaries and workspaces), never lent to other work until the graph goes.
//   Without accumulation `exec` is the whole step: the batch gather, the training graph's run and the loss, then the
//   optimizer step and the buffer commits.
//   With accumulation `exec` is one micro-batch (the gather, the run, the loss, the gradients added into the
//   optimizer's accumulation buffer, the updated buffers copied for the next micro-batch), launched once per
//   micro-batch with that micro-batch's parameters in the block, and `update` the optimizer step and the commits.
struct CapturedStep {
  CapturedStep() = default;
  CapturedStep(const CapturedStep&) = delete;
  CapturedStep& operator=(const CapturedStep&) = delete;
  ~CapturedStep() {
    // An executable graph still running is freed when it completes.
    if (exec) (void)cudaGraphExecDestroy(exec);
    if (update) (void)cudaGraphExecDestroy(update);
    for (cudaGraph_t g : graphs) (void)cudaGraphDestroy(g);
  }

  cudaGraphExec_t exec = nullptr;
  cudaGraphExec_t update = nullptr;
  std::vector<cudaGraph_t> graphs;  // the captured pieces and the graph made of them (until instantiated)
  std::vector<ir::Tensor> outputs;  // the captured run's: loss, gradients, updated buffers
  std::vector<std::shared_ptr<ir::Buffer>> retained;
};

// An error of the CUDA runtime as a Status, for the capture's own calls.
Status CaptureError(cudaError_t e, const char* what) {
  (void)cudaGetLastError();  // capture errors are not sticky: clear them for the eager step that follows
  return Internal(what, ": ", cudaGetErrorString(e));
}

class CudaTraining final : public DeviceTraining {
 public:
  static StatusOr<std::unique_ptr<DeviceTraining>> Create(const TrainerOptions& options, const TrainingGraphs& graphs,
                                                          const Dataset& train);

  std::string Describe() const override { return description_; }
  Status Step(const std::vector<std::vector<int64_t>>& micro_batches, uint64_t rng_step) override;
  Status RunStep(const std::vector<std::vector<int64_t>>& micro_batches, uint64_t rng_step);
  StatusOr<std::vector<DeviceStepResult>> Drain() override;
  StatusOr<std::vector<ir::Tensor>> EvalBatch(const std::vector<ir::Tensor>& batch) override;
  Status Download(ParameterStore* store, std::vector<ir::Tensor>* buffers, std::vector<ir::Tensor>* ema_buffers,
                  std::optional<GradScalerState>* scaler, int64_t* steps_taken) override;
  Status Upload(const ParameterStore& store, const std::vector<ir::Tensor>& buffers,
                const std::vector<ir::Tensor>& ema_buffers, const std::optional<GradScalerState>& scaler,
                int64_t steps_done, int64_t steps_taken, int64_t skipped) override;
  Status SwapEma() override;
  Status SetSchedule(const LrSchedule& schedule) override { return optimizer_->SetSchedule(schedule); }
  ~CudaTraining() override {
    if (ledger_) {
      ledger_->Add(-registered_bytes_, -registered_bytes_, -registered_bytes_);
      ledger_->ClosePeakWindow(peak_window_);
    }
  }
  uint64_t peak_device_bytes() const override;
  uint64_t peak_reserved_device_bytes() const override;
  void SetProfile(StepProfile* profile) override { profile_ = profile; }
  DeviceGraphStats graph_stats() const override { return graph_policy_.stats(); }
  const RecomputeReport& recompute_report() const override { return recompute_; }

 private:
  CudaTraining(const TrainerOptions& options, const TrainingGraphs& graphs, const Dataset& train)
      : options_(options), graphs_(graphs), train_(train), graph_policy_(options.cuda_graph) {}

  // One step kernel by kernel; `planned` (may be null): set to whether every run used the session's memory plan
  // and allocated nothing outside it.
  Status EagerStep(const std::vector<std::vector<int64_t>>& micro_batches, uint64_t rng_step, bool* planned);
  // CUDA Graphs: why this step cannot be captured ("" when it can).
  std::string GraphBlocker(const std::vector<std::vector<int64_t>>& micro_batches) const;
  // Launches the captured step for `micro_batches`: each micro-batch's parameters (its RNG step, whether it is the
  // first, its rows; staged together through the pinned index ring) copied into the fixed block the graph reads, then
  // the graph; with accumulation the committed buffers copied into the micro-batch buffers first and the update
  // graph last. All asynchronous, in stream order.
  Status LaunchCaptured(const std::vector<std::vector<int64_t>>& micro_batches, uint64_t rng_step);
  // Captures the step (CapturedStep) for micro-batches of `rows` rows each.
  StatusOr<std::unique_ptr<CapturedStep>> Capture(int64_t rows);
  Status CaptureForward(int64_t rows, CapturedStep* step);
  Status CaptureUpdate(CapturedStep* step);
  Status CaptureAccumulation(CapturedStep* step);
  // With accumulation, what the run of each micro-batch reads as the buffers.
  bool accumulating() const { return options_.accumulate > 1; }
  // Captures what `body` enqueues on the stream as one more piece of `step` (`what` names it in errors).
  Status CapturePiece(const char* what, const std::function<Status()>& body, CapturedStep* step);
  // The FP32 device gradients among a train run's outputs (loss, gradients, updated buffers), checked.
  StatusOr<std::vector<const float*>> GradientsOf(const std::vector<ir::Tensor>& outputs) const;
  // `buffers` with the updated buffers of a train run's outputs in place of theirs.
  std::vector<ir::Tensor> WithUpdatedBuffers(const std::vector<ir::Tensor>& outputs,
                                             std::vector<ir::Tensor> buffers) const;
  // Enqueues the copy of each updated buffer in `pending` (one per buffer) over the committed one, taken only when
  // the step is (the optimizer's found_inf flag); with EMA, then the update of each buffer's moving average.
  Status CommitIfTaken(const std::vector<ir::Tensor>& pending);
  // Copies host tensors into device buffers of the same sizes (Upload).
  Status CopyToDevice(const std::vector<ir::Tensor>& host, const std::vector<ir::Tensor>& device);
  void PrintGraphNotices();

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
  // With TrainerOptions::ema_decay: their moving averages on the device (swapped with committed_ by SwapEma).
  std::vector<ir::Tensor> ema_committed_;
  // The training data on the device (one buffer per bound array), or empty when it is fed from the host.
  std::vector<std::shared_ptr<ir::Buffer>> device_data_;
  IndexRing indices_;
  // CUDA Graphs: the captured steps' parameter blocks (per micro-batch: kStepParamsHeader values, then the rows),
  // a ring of their own so that the batches' ring keeps slots of one batch.
  IndexRing step_ring_;
  // The device's ledger (every session's allocator) and what this training added to it: the optimizer's buffers and
  // the index ring, which come from cudaMalloc directly.
  exec::DeviceMemoryLedger* ledger_ = nullptr;
  int peak_window_ = 0;  // this training's window over the ledger's peaks
  int64_t registered_bytes_ = 0;
  int64_t optimizer_bytes_ = 0;  // the optimizer's part of it (its scalar table grows as steps are enqueued)
  std::string description_;
  StepProfile* profile_ = nullptr;  // profiling the steps (SetProfile)
  // CUDA Graphs (TrainerOptions::cuda_graph): the policy, the fixed device block of the step's parameters
  // ([rng_step, first micro-batch, the batch's rows...], int64: kStepParamsHeader), the fixed batch buffers
  // (batch_size rows of each training array), with accumulation the buffers a captured micro-batch reads and
  // updates (per buffer: a device copy of an updated one, the committed tensor of any other), and the captured step
  // (declared last: destroyed before the sessions and the optimizer).
  StepGraphPolicy graph_policy_;
  std::string capture_blocker_;  // set at Create when no step of this graph can be captured
  RecomputeReport recompute_;    // what --recompute did to the training session's graph
  std::shared_ptr<ir::Buffer> step_params_;
  std::vector<std::shared_ptr<ir::Buffer>> graph_batch_;
  std::vector<ir::Tensor> micro_buffers_;
  std::unique_ptr<CapturedStep> graph_;
};

StatusOr<std::unique_ptr<DeviceTraining>> CudaTraining::Create(const TrainerOptions& options,
                                                               const TrainingGraphs& graphs, const Dataset& train) {
  if (!onnxamp::cuda::RegisterCudaBackend()) return FailedPrecondition("--device cuda: no usable CUDA device");
  std::unique_ptr<CudaTraining> t(new CudaTraining(options, graphs, train));
  // The peaks count from here: everything on the device while this training lives, as torch.cuda's peaks after
  // reset_peak_memory_stats do; in a window of its own, so that a second training started meanwhile does not reset
  // this one's.
  t->ledger_ = &onnxamp::cuda::CachingAllocator::DeviceLedger(options.device_index);
  t->peak_window_ = t->ledger_->OpenPeakWindow();
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
  train_options.finalize_graph =
      RecomputeHook(graphs.train, graphs.loss_scale, options.graph.recompute, &t->recompute_);
  StatusOr<std::unique_ptr<exec::Session>> ts = exec::Session::Create(std::move(train_model), train_options);
  if (!ts.ok()) return ts.status().WithContext("the training graph on CUDA");
  t->train_session_ = std::move(ts).value();
  StatusOr<std::unique_ptr<exec::Session>> es = exec::Session::Create(std::move(eval_model), session);
  if (!es.ok()) return es.status().WithContext("the evaluation graph on CUDA");
  t->eval_session_ = std::move(es).value();
  t->context_ = dynamic_cast<onnxamp::cuda::CudaContext*>(t->train_session_->device_context());
  if (!t->context_) return Internal("the training session has no CUDA context");
  t->stream_ = t->context_->stream();
  // Random ops other than Dropout draw with the host's RNG step, which a replayed step would repeat; RoiAlign and its
  // gradient read their rois on the host and upload what they derive from them, which a replay would not redo.
  for (const ir::Node* node : graphs.train.graph->nodes()) {
    const std::string& op = node->op_type();
    if (op.rfind("Random", 0) == 0 || op == "Multinomial" || op == "Bernoulli") {
      t->capture_blocker_ = StrCat(node->Describe(), " draws its numbers with the host's RNG step");
      break;
    }
    if (op == "RoiAlign" || op == ops::kRoiAlignGradOp) {
      t->capture_blocker_ = StrCat(node->Describe(), " reads its rois on the host");
      break;
    }
  }

  FusedOptimizerOptions fo;
  fo.kind = options.optimizer;
  fo.sgd = options.sgd;
  fo.adam = options.adam;
  fo.radam = options.radam;
  fo.nadam = options.nadam;
  fo.rmsprop = options.rmsprop;
  fo.adagrad = options.adagrad;
  fo.lion = options.lion;
  fo.schedule = options.schedule;
  fo.scaler = options.scaler;
  fo.clip_norm = options.clip_norm;
  fo.clip_value = options.clip_value;
  fo.accumulate = options.accumulate;
  fo.low_precision = t->train_low_.empty() && t->eval_low_.empty() ? DType::kUndefined : low;
  fo.device_index = options.device_index;
  ONNXAMP_ASSIGN_OR_RETURN(fo.groups, ParameterGroupsOf(options, graphs));
  fo.ema_decay = options.ema_decay;
  fo.ema_warmup = options.ema_warmup;
  fo.swa_start = options.swa_start;
  // Under FP16 AMP a parameter's gradient that the train graph casts from FP16 (the gradient of the Cast feeding its
  // FP16 copy) was inf above the FP16 range; the CUDA session may compute it in FP32 directly (an FP32-output
  // weight-gradient GEMM), so the optimizer treats that range as overflow and skips the same steps as the graph as
  // written, and as the CPU trainer.
  if (low == DType::kFloat16 && options.scaler.mode != LossScaleMode::kDisabled) {
    fo.gradient_overflow_at = Fp16GradientOverflowThresholds(*graphs.train.graph, graphs.params);
  }
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
  t->optimizer_bytes_ = static_cast<int64_t>(t->optimizer_->device_bytes());
  t->registered_bytes_ = t->optimizer_bytes_;
  t->ledger_->Add(t->registered_bytes_, t->registered_bytes_, t->registered_bytes_);
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
    if (options.averaging()) {
      StatusOr<ir::Tensor> e = t->train_session_->ToDevice(v);
      if (!e.ok()) return e.status().WithContext(StrCat("the moving average of buffer ", b.name));
      t->ema_committed_.push_back(std::move(e).value());
    }
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
    ONNXAMP_RETURN_IF_ERROR(t->indices_.Init(options.batch_size));
    int64_t ring_bytes = static_cast<int64_t>(t->indices_.device_bytes());
    if (options.cuda_graph != CudaGraphMode::kOff && t->capture_blocker_.empty()) {
      const int64_t micro = std::max(options.accumulate, 1);
      ONNXAMP_RETURN_IF_ERROR(t->step_ring_.Init(micro * (options.batch_size + kStepParamsHeader)));
      ring_bytes += static_cast<int64_t>(t->step_ring_.device_bytes());
    }
    t->registered_bytes_ += ring_bytes;
    t->ledger_->Add(ring_bytes, ring_bytes, ring_bytes);
    if (options.cuda_graph != CudaGraphMode::kOff && t->capture_blocker_.empty()) {
      // CUDA Graphs: the fixed step-parameter block and batch buffers that a captured step reads.
      const int64_t batch = std::max<int64_t>(options.batch_size, 1);
      ONNXAMP_ASSIGN_OR_RETURN(t->step_params_,
                               t->context_->Allocate(static_cast<size_t>(batch + kStepParamsHeader) * sizeof(int64_t)));
      for (const ir::Tensor& a : train.arrays()) {
        const int64_t n = a.dims().empty() ? 1 : a.dims()[0];
        const size_t row_bytes = n > 0 ? a.nbytes() / static_cast<size_t>(n) : 0;
        ONNXAMP_ASSIGN_OR_RETURN(std::shared_ptr<ir::Buffer> b,
                                 t->context_->Allocate(std::max<size_t>(row_bytes * static_cast<size_t>(batch), 1)));
        t->graph_batch_.push_back(std::move(b));
      }
      if (t->accumulating()) {
        for (size_t b = 0; b < graphs.buffers.size(); ++b) {
          const ir::Tensor& c = t->committed_[b];
          if (graphs.buffers[b].updated.empty()) {
            t->micro_buffers_.push_back(c);
            continue;
          }
          StatusOr<std::shared_ptr<ir::Buffer>> buf = t->context_->Allocate(std::max<size_t>(c.nbytes(), 1));
          if (!buf.ok()) return buf.status().WithContext(StrCat("the micro-batch copy of buffer ", c.name()));
          t->micro_buffers_.push_back(DeviceView(c.dtype(), c.dims(), (*buf)->data(), *buf, c.name()));
        }
      }
    }
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

Status CudaTraining::EagerStep(const std::vector<std::vector<int64_t>>& micro_batches, uint64_t rng_step,
                               bool* planned) {
  if (planned) *planned = true;
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
  std::vector<const float*> grads;
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
    StatusOr<std::vector<ir::Tensor>> out = train_session_->Run(feeds, run, profile_ || planned ? &stats : nullptr);
    if (!out.ok()) return out.status();
    if (planned) *planned = *planned && stats.planned && stats.unplanned_values == 0;
    outputs = std::move(out).value();
    if (profile_) {
      ONNXAMP_ASSIGN_OR_RETURN(const double seconds, drained_since(run_start));
      profile_->AddRun(stats.nodes, seconds);
    }
    const auto optimizer_start = Clock::now();
    ONNXAMP_ASSIGN_OR_RETURN(grads, GradientsOf(outputs));
    if (outputs[0].on_host() || outputs[0].dtype() != DType::kFloat32) {
      return Internal("the loss is not an FP32 device scalar");
    }
    ONNXAMP_RETURN_IF_ERROR(optimizer_->AddLoss(reinterpret_cast<const float*>(outputs[0].data()),
                                                static_cast<double>(micro_batches[m].size())));
    if (micro_batches.size() > 1) ONNXAMP_RETURN_IF_ERROR(optimizer_->Accumulate(grads));
    pending = WithUpdatedBuffers(outputs, std::move(pending));
    if (profile_) {
      ONNXAMP_ASSIGN_OR_RETURN(const double seconds, drained_since(optimizer_start));
      profile_->AddOptimizer(seconds);
    }
  }
  const auto optimizer_start = Clock::now();
  ONNXAMP_RETURN_IF_ERROR(optimizer_->Step(micro_batches.size() > 1 ? std::vector<const float*>{} : grads));
  ONNXAMP_RETURN_IF_ERROR(CommitIfTaken(pending));
  if (profile_) {
    ONNXAMP_ASSIGN_OR_RETURN(const double seconds, drained_since(optimizer_start));
    profile_->AddOptimizer(seconds);
  }
  return Status::Ok();
}

Status CudaTraining::Step(const std::vector<std::vector<int64_t>>& micro_batches, uint64_t rng_step) {
  const Status st = RunStep(micro_batches, rng_step);
  // What the optimizer allocated for the step (its scalar table), in the device's ledger.
  const int64_t grown = static_cast<int64_t>(optimizer_->device_bytes()) - optimizer_bytes_;
  if (grown != 0) {
    ledger_->Add(grown, grown, grown);
    optimizer_bytes_ += grown;
    registered_bytes_ += grown;
  }
  return st;
}

Status CudaTraining::RunStep(const std::vector<std::vector<int64_t>>& micro_batches, uint64_t rng_step) {
  if (options_.cuda_graph == CudaGraphMode::kOff) return EagerStep(micro_batches, rng_step, nullptr);
  // The scalar table and the record ring ready for one more step (eager work that may allocate or synchronise),
  // before the key is read: growing the table changes the optimizer's generation.
  ONNXAMP_RETURN_IF_ERROR(optimizer_->PrepareGraphStep());
  StepGraphKey key;
  for (const std::vector<int64_t>& mb : micro_batches) key.rows.push_back(static_cast<int64_t>(mb.size()));
  key.generation = optimizer_->generation();
  StepGraphAction action = graph_policy_.Next(key, GraphBlocker(micro_batches));
  if (action == StepGraphAction::kCapture) {
    graph_.reset();  // its blocks go back to the cache, for work queued after what is queued so far
    StatusOr<std::unique_ptr<CapturedStep>> captured = Capture(key.rows[0]);
    if (captured.ok()) {
      graph_ = std::move(captured).value();
      graph_policy_.Captured(key);
    } else {
      graph_policy_.CaptureFailed(captured.status().message());
      action = StepGraphAction::kEager;
    }
  }
  if (action != StepGraphAction::kEager) {
    if (!graph_) return Internal("a CUDA Graph replay without a captured step");
    ONNXAMP_RETURN_IF_ERROR(LaunchCaptured(micro_batches, rng_step));
    optimizer_->GraphStepLaunched();
    graph_policy_.Replayed();
    PrintGraphNotices();
    return Status::Ok();
  }
  bool planned = false;
  Status st = EagerStep(micro_batches, rng_step, &planned);
  graph_policy_.RanEager(key, planned);
  if (!graph_policy_.has_graph()) graph_.reset();  // ordered after the eager step's work, which does not use it
  PrintGraphNotices();
  return st;
}

std::string CudaTraining::GraphBlocker(const std::vector<std::vector<int64_t>>& micro_batches) const {
  if (!capture_blocker_.empty()) return capture_blocker_;
  if (device_data_.empty() || !step_params_) return "the training data is fed from the host";
  if (profile_) return "a profiled step";
  if (micro_batches.empty() || static_cast<int64_t>(micro_batches.size()) != std::max(options_.accumulate, 1)) {
    return "a step of another number of micro-batches than --accumulate";
  }
  const int64_t rows = static_cast<int64_t>(micro_batches[0].size());
  if (rows == 0 || rows > std::max<int64_t>(options_.batch_size, 1)) return "a batch of another size than planned";
  for (const std::vector<int64_t>& mb : micro_batches) {
    if (static_cast<int64_t>(mb.size()) != rows) return "micro-batches of different sizes in one step";
  }
  return std::string();
}

Status CudaTraining::LaunchCaptured(const std::vector<std::vector<int64_t>>& micro_batches, uint64_t rng_step) {
  const int64_t stride = static_cast<int64_t>(micro_batches[0].size()) + kStepParamsHeader;
  std::vector<int64_t> values;
  values.reserve(micro_batches.size() * static_cast<size_t>(stride));
  for (size_t m = 0; m < micro_batches.size(); ++m) {
    values.push_back(static_cast<int64_t>(rng_step + m));  // the same 64 bits, read back as uint64 on the device
    values.push_back(m == 0 ? 1 : 0);
    for (int64_t r : train_.ArrayRows(micro_batches[m])) values.push_back(r);
  }
  ONNXAMP_ASSIGN_OR_RETURN(const int64_t* staged, step_ring_.Upload(values, stream_));
  // The slot is released behind whatever was enqueued, on every path: its upload may still be pending.
  const Status launched = [&]() -> Status {
    if (accumulating()) {
      for (size_t b = 0; b < micro_buffers_.size(); ++b) {
        if (graphs_.buffers[b].updated.empty()) continue;
        ONNXAMP_CUDA_RETURN_IF_ERROR(
            cudaMemcpyAsync(const_cast<std::byte*>(micro_buffers_[b].data()), committed_[b].data(),
                            committed_[b].nbytes(), cudaMemcpyDeviceToDevice, stream_),
            "the buffers of the step's first micro-batch");
      }
    }
    for (size_t m = 0; m < micro_batches.size(); ++m) {
      ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(step_params_->data(), staged + m * stride, stride * sizeof(int64_t),
                                                   cudaMemcpyDeviceToDevice, stream_),
                                   "staging the captured step's parameters");
      ONNXAMP_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graph_->exec, stream_), "launching the captured training step");
    }
    return Status::Ok();
  }();
  const Status released = step_ring_.Release(stream_);
  ONNXAMP_RETURN_IF_ERROR(launched);
  ONNXAMP_RETURN_IF_ERROR(released);
  if (graph_->update) {
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graph_->update, stream_), "launching the captured optimizer step");
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<CapturedStep>> CudaTraining::Capture(int64_t rows) {
  auto step = std::make_unique<CapturedStep>();
  // Every block the capture allocates stays the graph's; Dropout reads the step's RNG step from the device.
  context_->RetainAllocations(true);
  context_->set_device_rng_step(reinterpret_cast<const uint64_t*>(step_params_->data()));
  Status st = CaptureForward(rows, step.get());
  if (st.ok()) st = accumulating() ? CaptureAccumulation(step.get()) : CaptureUpdate(step.get());
  context_->set_device_rng_step(nullptr);
  context_->RetainAllocations(false);
  step->retained = context_->TakeRetained();
  if (!st.ok()) return st;
  // One graph of the first two pieces (the gradient table is bound between them), instantiated; with accumulation
  // the third piece (the optimizer step) apart.
  cudaGraph_t whole = nullptr;
  cudaError_t e = cudaGraphCreate(&whole, 0);
  if (e != cudaSuccess) return CaptureError(e, "cudaGraphCreate");
  cudaGraph_t first = step->graphs[0];
  cudaGraph_t second = step->graphs[1];
  step->graphs.push_back(whole);
  cudaGraphNode_t first_node = nullptr, second_node = nullptr;
  e = cudaGraphAddChildGraphNode(&first_node, whole, nullptr, 0, first);
  if (e == cudaSuccess) e = cudaGraphAddChildGraphNode(&second_node, whole, &first_node, 1, second);
  if (e != cudaSuccess) return CaptureError(e, "cudaGraphAddChildGraphNode");
  e = cudaGraphInstantiate(&step->exec, whole, 0);
  if (e != cudaSuccess) return CaptureError(e, "cudaGraphInstantiate");
  if (accumulating()) {
    e = cudaGraphInstantiate(&step->update, step->graphs[2], 0);
    if (e != cudaSuccess) return CaptureError(e, "cudaGraphInstantiate (the optimizer step)");
  }
  return step;
}

Status CudaTraining::CaptureForward(int64_t rows, CapturedStep* step) {
  // The batch: views of the fixed buffers, gathered on the device from the rows in the step's parameter block.
  std::vector<ir::Tensor> feeds;
  std::vector<size_t> row_bytes;
  for (size_t k = 0; k < train_.arrays().size(); ++k) {
    const ir::Tensor& a = train_.arrays()[k];
    const int64_t n = a.dims().empty() ? 1 : a.dims()[0];
    row_bytes.push_back(n > 0 ? a.nbytes() / static_cast<size_t>(n) : 0);
    std::vector<int64_t> dims = a.dims();
    if (dims.empty()) return Internal("the training array '", a.name(), "' has no sample dim");
    dims[0] = rows;
    feeds.push_back(DeviceView(a.dtype(), dims, graph_batch_[k]->data(), graph_batch_[k], a.name()));
  }
  if (!graphs_.labels.empty() && !feeds.empty()) feeds.back().set_name(graphs_.labels);
  AddStateFeeds(false, accumulating() ? micro_buffers_ : committed_, &feeds);
  feeds.push_back(seed_);
  exec::RunOptions run = train_run_;
  run.rng_step = 0;  // the step's own is on the device (CudaContext::set_device_rng_step)
  run.profile = false;
  const int64_t* indices =
      static_cast<const int64_t*>(static_cast<const void*>(step_params_->data())) + kStepParamsHeader;

  return CapturePiece(
      "the training graph's run",
      [&]() -> Status {
        for (size_t k = 0; k < train_.arrays().size(); ++k) {
          const ir::Tensor& a = train_.arrays()[k];
          ONNXAMP_RETURN_IF_ERROR(GatherRows(device_data_[k]->data(), a.dims()[0], row_bytes[k], indices, rows,
                                             graph_batch_[k]->data(), stream_));
        }
        // Tests: a call that capture forbids, which invalidates the capture.
        if (fail_captures_for_testing.load()) (void)cudaStreamSynchronize(stream_);
        exec::RunStats stats;
        StatusOr<std::vector<ir::Tensor>> out = train_session_->Run(feeds, run, &stats);
        if (!out.ok()) return out.status();
        if (!stats.planned || stats.unplanned_values > 0) {
          return FailedPrecondition("the run allocated ", stats.unplanned_values, " values outside its memory plan");
        }
        step->outputs = std::move(out).value();
        const ir::Tensor& loss = step->outputs.at(0);
        if (loss.on_host() || loss.dtype() != DType::kFloat32) return Internal("the loss is not an FP32 device scalar");
        return optimizer_->AddLoss(reinterpret_cast<const float*>(loss.data()), static_cast<double>(rows));
      },
      step);
}

Status CudaTraining::CaptureUpdate(CapturedStep* step) {
  ONNXAMP_ASSIGN_OR_RETURN(const std::vector<const float*> grads, GradientsOf(step->outputs));
  const std::vector<ir::Tensor> pending = WithUpdatedBuffers(step->outputs, committed_);
  // Outside the capture: the gradient table of the captured step, bound once.
  ONNXAMP_RETURN_IF_ERROR(optimizer_->BindCaptureGradients(grads));
  return CapturePiece(
      "the optimizer step",
      [&]() -> Status {
        ONNXAMP_RETURN_IF_ERROR(optimizer_->CaptureStep(grads));
        return CommitIfTaken(pending);
      },
      step);
}

Status CudaTraining::CaptureAccumulation(CapturedStep* step) {
  ONNXAMP_ASSIGN_OR_RETURN(const std::vector<const float*> grads, GradientsOf(step->outputs));
  const std::vector<ir::Tensor> updated = WithUpdatedBuffers(step->outputs, micro_buffers_);
  // Outside the capture: the gradient table of the captured micro-batch, bound once.
  ONNXAMP_RETURN_IF_ERROR(optimizer_->BindCaptureGradients(grads));
  const int64_t* first = static_cast<const int64_t*>(static_cast<const void*>(step_params_->data())) + 1;
  ONNXAMP_RETURN_IF_ERROR(CapturePiece(
      "a micro-batch's accumulation",
      [&]() -> Status {
        ONNXAMP_RETURN_IF_ERROR(optimizer_->CaptureAccumulate(grads, first));
        // The updated buffers where the next micro-batch (or the commit) reads them.
        for (size_t b = 0; b < micro_buffers_.size(); ++b) {
          if (updated[b].buffer() == micro_buffers_[b].buffer()) continue;
          if (updated[b].nbytes() != micro_buffers_[b].nbytes() || updated[b].on_host()) {
            return Internal("the updated buffer '", graphs_.buffers[b].name, "' does not match the committed one");
          }
          ONNXAMP_CUDA_RETURN_IF_ERROR(
              cudaMemcpyAsync(const_cast<std::byte*>(micro_buffers_[b].data()), updated[b].data(), updated[b].nbytes(),
                              cudaMemcpyDeviceToDevice, stream_),
              "the buffers a micro-batch updated");
        }
        return Status::Ok();
      },
      step));
  return CapturePiece(
      "the optimizer step",
      [&]() -> Status {
        ONNXAMP_RETURN_IF_ERROR(optimizer_->CaptureStep({}));
        return CommitIfTaken(micro_buffers_);
      },
      step);
}

Status CudaTraining::CapturePiece(const char* what, const std::function<Status()>& body, CapturedStep* step) {
  cudaError_t e = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed);
  if (e != cudaSuccess) return CaptureError(e, "cudaStreamBeginCapture");
  const Status st = body();
  cudaGraph_t graph = nullptr;
  e = cudaStreamEndCapture(stream_, &graph);
  if (graph) step->graphs.push_back(graph);
  if (!st.ok()) {
    (void)cudaGetLastError();
    return st.WithContext(StrCat("capturing ", what));
  }
  if (e != cudaSuccess || !graph) return CaptureError(e, StrCat("capturing ", what).c_str());
  return Status::Ok();
}

StatusOr<std::vector<const float*>> CudaTraining::GradientsOf(const std::vector<ir::Tensor>& outputs) const {
  std::vector<const float*> grads(graphs_.params.size());
  for (size_t i = 0; i < graphs_.params.size(); ++i) {
    const ir::Tensor& g = outputs.at(1 + i);
    if (g.dtype() != DType::kFloat32 || g.num_elements() != graphs_.params[i].initial.num_elements() || g.on_host()) {
      return Internal("the gradient of '", graphs_.params[i].name, "' is not an FP32 device tensor of its size");
    }
    grads[i] = reinterpret_cast<const float*>(g.data());
  }
  return grads;
}

std::vector<ir::Tensor> CudaTraining::WithUpdatedBuffers(const std::vector<ir::Tensor>& outputs,
                                                         std::vector<ir::Tensor> buffers) const {
  size_t k = 1 + graphs_.params.size();
  for (size_t b = 0; b < graphs_.buffers.size(); ++b) {
    if (graphs_.buffers[b].updated.empty()) continue;
    buffers[b] = outputs.at(k++);
    buffers[b].set_name(graphs_.buffers[b].name);
  }
  return buffers;
}

Status CudaTraining::CommitIfTaken(const std::vector<ir::Tensor>& pending) {
  for (size_t b = 0; b < committed_.size(); ++b) {
    if (pending[b].buffer() == committed_[b].buffer()) continue;
    if (pending[b].nbytes() != committed_[b].nbytes() || pending[b].on_host()) {
      return Internal("the updated buffer '", graphs_.buffers[b].name, "' does not match the committed one");
    }
    ONNXAMP_RETURN_IF_ERROR(CopyIfTaken(optimizer_->found_inf(), pending[b].data(),
                                        const_cast<std::byte*>(committed_[b].data()), committed_[b].nbytes(), stream_));
  }
  // The averages of every buffer, updated or not (as the CPU's Trainer::UpdateEma): float32 ones lerped with the
  // step's EMA weight, others (counts) copied; none before stochastic weight averaging starts (weight 0).
  for (size_t b = 0; b < ema_committed_.size(); ++b) {
    const ir::Tensor& live = committed_[b];
    void* ema = const_cast<std::byte*>(ema_committed_[b].data());
    if (live.dtype() == DType::kFloat32) {
      ONNXAMP_RETURN_IF_ERROR(LerpIfTaken(optimizer_->found_inf(), optimizer_->ema_weight(),
                                          reinterpret_cast<const float*>(live.data()), static_cast<float*>(ema),
                                          static_cast<int64_t>(live.num_elements()), stream_));
    } else {
      ONNXAMP_RETURN_IF_ERROR(
          CopyIfTaken(optimizer_->found_inf(), live.data(), ema, live.nbytes(), stream_, optimizer_->ema_weight()));
    }
  }
  return Status::Ok();
}

Status CudaTraining::SwapEma() {
  if (ema_committed_.size() != committed_.size()) return FailedPrecondition("SwapEma: no moving average is kept");
  ONNXAMP_RETURN_IF_ERROR(optimizer_->SwapEma());
  // The buffers by address: nothing captured runs between the two exchanges of an evaluation.
  std::swap(committed_, ema_committed_);
  return Status::Ok();
}

void CudaTraining::PrintGraphNotices() {
  for (const std::string& n : graph_policy_.TakeNotices()) std::fprintf(stderr, "train: %s\n", n.c_str());
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
                              std::vector<ir::Tensor>* ema_buffers, std::optional<GradScalerState>* scaler,
                              int64_t* steps_taken) {
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
  auto download = [&](const std::vector<ir::Tensor>& device, std::vector<ir::Tensor>* host) -> Status {
    host->clear();
    for (size_t b = 0; b < device.size(); ++b) {
      StatusOr<ir::Tensor> h = train_session_->ToHost(device[b]);
      if (!h.ok()) return h.status().WithContext(StrCat("buffer ", graphs_.buffers[b].name));
      ir::Tensor v = std::move(h).value();
      v.set_name(graphs_.buffers[b].name);
      host->push_back(std::move(v));
    }
    return Status::Ok();
  };
  ONNXAMP_RETURN_IF_ERROR(download(committed_, buffers));
  ONNXAMP_RETURN_IF_ERROR(download(ema_committed_, ema_buffers));
  *scaler = optimizer_->ScalerState();
  return Status::Ok();
}

Status CudaTraining::CopyToDevice(const std::vector<ir::Tensor>& host, const std::vector<ir::Tensor>& device) {
  if (host.size() != device.size()) return Internal("buffer count mismatch on upload");
  for (size_t b = 0; b < host.size(); ++b) {
    if (host[b].nbytes() != device[b].nbytes()) {
      return InvalidArgument("buffer '", host[b].name(), "' does not match the device's");
    }
    ONNXAMP_RETURN_IF_ERROR(
        context_->CopyHostToDevice(host[b].data(), const_cast<std::byte*>(device[b].data()), host[b].nbytes()));
  }
  return Status::Ok();
}

Status CudaTraining::Upload(const ParameterStore& store, const std::vector<ir::Tensor>& buffers,
                            const std::vector<ir::Tensor>& ema_buffers, const std::optional<GradScalerState>& scaler,
                            int64_t steps_done, int64_t steps_taken, int64_t skipped) {
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
  ONNXAMP_RETURN_IF_ERROR(CopyToDevice(buffers, committed_));
  ONNXAMP_RETURN_IF_ERROR(CopyToDevice(ema_buffers, ema_committed_));
  if (scaler) ONNXAMP_RETURN_IF_ERROR(optimizer_->RestoreScaler(*scaler));
  ONNXAMP_RETURN_IF_ERROR(optimizer_->RestoreCounters(steps_done, steps_taken, skipped));
  return context_->Synchronize();
}

// The ledger sums every allocator of the device (both sessions: they never run at once, and their values are counted
// when they are held, not when each session peaked) and the optimizer's buffers, so its peak is the device's.
uint64_t CudaTraining::peak_device_bytes() const { return ledger_->WindowStats(peak_window_).peak_allocated_bytes; }

uint64_t CudaTraining::peak_reserved_device_bytes() const {
  return ledger_->WindowStats(peak_window_).peak_reserved_bytes;
}

}  // namespace

void FailCudaGraphCapturesForTesting(bool fail) { fail_captures_for_testing.store(fail); }

bool RegisterCudaTraining() {
  static const bool registered = [] {
    if (!onnxamp::cuda::RegisterCudaBackend()) return false;
    RegisterDeviceTraining(exec::Device::kCuda, &CudaTraining::Create);
    return true;
  }();
  return registered;
}

}  // namespace onnxamp::trainer::cuda
