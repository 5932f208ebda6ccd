// Trainer: sessions over the training graphs, and the step (micro-batches, unscale and inf check, clip, optimizer,
// schedule, buffers, scaler update) in the order PyTorch's AMP recipe runs it.
#include "trainer/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

#include "converter/model_clone.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/elementwise_half.h"
#include "trainer/export.h"
#include "trainer/optim/clip.h"
#include "trainer/optim/optim_math.h"
#include "trainer/optim/optim_simd.h"

namespace onnxamp::trainer {
namespace {

// A copy of `t`'s bytes in memory of its own (the name goes with it).
ir::Tensor OwnedCopy(const ir::Tensor& t) {
  ir::Tensor copy = ir::Tensor::Uninitialized(t.dtype(), t.dims());
  if (t.nbytes()) std::memcpy(copy.mutable_data(), t.data(), t.nbytes());
  copy.set_name(t.name());
  return copy;
}

double ScalarOf(const ir::Tensor& t) {
  if (t.dtype() == DType::kFloat32 && t.num_elements() == 1) return t.values<float>()[0];
  if (t.dtype() == DType::kFloat64 && t.num_elements() == 1) return t.values<double>()[0];
  return std::nan("");
}

ir::Tensor FloatScalar(float v, const std::string& name) {
  ir::Tensor t(DType::kFloat32, {});
  t.mutable_values<float>()[0] = v;
  t.set_name(name);
  return t;
}

// Whether class `c`'s score `s` outranks the label's (`label`, `score`) as an argmax ranks them: a higher score, or an
// equal one at a lower class index (ties go to the lower index); NaN above every number, and of two NaNs the lower
// index, as numpy's argmax, torch.argmax and the ArgMax op take the first NaN. (Compared as numbers only, a NaN score
// would be outranked by nothing: every position of a diverged model counted as correct.)
bool Outranks(float s, int64_t c, float score, int64_t label) {
  const bool s_nan = std::isnan(s), label_nan = std::isnan(score);
  if (s_nan != label_nan) return s_nan;
  if (s_nan) return c < label;
  return s > score || (s == score && c < label);
}

// Correct predictions and counted positions of a classification batch: a position is top-1 correct when no class
// outranks its label (Outranks), top-k correct when fewer than k classes do.
void CountCorrect(const ir::Tensor& pred, const ir::Tensor& labels, int64_t class_axis, int64_t ignore_index,
                  int64_t top_k, int64_t* correct, int64_t* correct_k, int64_t* counted) {
  if (pred.dtype() != DType::kFloat32 || labels.dtype() != DType::kInt64) return;
  const std::vector<int64_t>& d = pred.dims();
  const int64_t rank = static_cast<int64_t>(d.size());
  const int64_t axis = class_axis < 0 ? class_axis + rank : class_axis;
  if (axis < 0 || axis >= rank) return;
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= d[k];
  for (int64_t k = axis + 1; k < rank; ++k) inner *= d[k];
  const int64_t classes = d[axis];
  if (labels.num_elements() != outer * inner) return;
  const auto p = pred.values<float>();
  const auto l = labels.values<int64_t>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t label = l[o * inner + i];
      if (label == ignore_index) continue;
      ++*counted;
      if (label < 0 || label >= classes) continue;
      const float score = p[(o * classes + label) * inner + i];
      int64_t above = 0;  // classes that outrank the label
      for (int64_t c = 0; c < classes; ++c) {
        const float s = p[(o * classes + c) * inner + i];
        above += Outranks(s, c, score, label);
      }
      *correct += above == 0;
      *correct_k += above < top_k;
    }
  }
}

}  // namespace

StatusOr<ParamGroups> ParameterGroupsOf(const TrainerOptions& options, const TrainingGraphs& graphs) {
  std::vector<std::string> names;
  std::vector<size_t> ranks;
  for (const Parameter& p : graphs.params) {
    names.push_back(p.name);
    ranks.push_back(p.initial.dims().size());
  }
  std::vector<int64_t> first_use;
  if (options.param_groups.layer_decay > 0) {
    // The position of the first node of the evaluation graph (the forward pass) that reads each parameter.
    const ir::Graph& g = *graphs.eval.graph;
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Node*> order, g.TopologicalOrder());
    std::map<const ir::Node*, int64_t> position;
    for (size_t k = 0; k < order.size(); ++k) position[order[k]] = static_cast<int64_t>(k);
    for (const std::string& name : names) {
      int64_t first = static_cast<int64_t>(order.size());
      if (const ir::Value* v = g.FindValue(name)) {
        for (const ir::Use& u : v->uses()) {
          const auto it = position.find(u.node);
          if (it != position.end()) first = std::min(first, it->second);
        }
      }
      first_use.push_back(first);
    }
  }
  ONNXAMP_ASSIGN_OR_RETURN(ParamGroups groups, AssignParamGroups(options.param_groups, names, ranks, first_use));
  for (const ParamGroup& g : groups.groups) {
    if (!std::isfinite(options.schedule.base_lr * g.lr_scale)) {
      return InvalidArgument("--lr-scale ", g.lr_scale, ": the learning rate ", options.schedule.base_lr,
                             " times it is not finite");
    }
  }
  return groups;
}

StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const ir::Model& model, const TrainerOptions& options,
                                                   Dataset train) {
  if (options.batch_size < 1) return InvalidArgument("--batch-size must be at least 1");
  if (options.accumulate < 1) return InvalidArgument("--accumulate must be at least 1");
  if (options.top_k < 0) return InvalidArgument("--top-k must be at least 1");
  if (options.steps <= 0 && options.epochs <= 0) return InvalidArgument("give --steps or --epochs");
  if (!(options.ema_decay >= 0 && options.ema_decay < 1)) {
    return InvalidArgument("--ema ", options.ema_decay, ": expected a decay in (0, 1)");
  }
  if (options.ema_warmup && options.ema_decay == 0) return InvalidArgument("--ema-warmup needs --ema");
  if (options.swa_start < -1) return InvalidArgument("--swa-start ", options.swa_start, ": expected a step count >= 0");
  if (options.swa_start >= 0 && options.ema_decay > 0) {
    return InvalidArgument("--ema and --swa-start: keep a moving average or an equal one, not both");
  }
  const auto clip_value = static_cast<float>(options.clip_value);  // as the clamp takes it
  if (!(std::isfinite(options.clip_norm) && options.clip_norm >= 0) ||
      !(std::isfinite(options.clip_value) && options.clip_value >= 0) ||
      (options.clip_value > 0 && !(clip_value > 0.0f && std::isfinite(clip_value)))) {
    return InvalidArgument("--clip-norm ", options.clip_norm, ", --clip-value ", options.clip_value,
                           ": expected finite values > 0 (0: no clipping; --clip-value a positive float32)");
  }
  if (options.clip_norm > 0 && options.clip_value > 0) {
    return InvalidArgument("--clip-norm and --clip-value: clip by the norm or by value, not both");
  }
  // A model the graphs may raise to a newer opset: checked on the first batch of the training data.
  TrainingGraphOptions graph_options = options.graph;
  if (model.OpsetVersion("") < kTrainingOpsetFloor) {
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < std::min<int64_t>(train.num_samples(), options.batch_size); ++i) rows.push_back(i);
    ONNXAMP_ASSIGN_OR_RETURN(graph_options.raise_check_batch, MakeBatch(train, rows));
    graph_options.raise_check_batch.resize(train.num_features());  // the model's inputs, without the labels
    graph_options.raise_check_threads = options.threads;
  }
  if (options.device != exec::Device::kCpu) graph_options.bfloat16_types_opset = kBFloat16TypesOpset;
  ONNXAMP_ASSIGN_OR_RETURN(TrainingGraphs graphs, BuildTrainingGraphs(model, graph_options));

  std::vector<ParameterSpec> specs;
  for (const Parameter& p : graphs.params) specs.push_back({p.name, p.initial.dims()});
  ONNXAMP_ASSIGN_OR_RETURN(ParameterStore store, ParameterStore::Create(std::move(specs)));
  for (size_t i = 0; i < graphs.params.size(); ++i) {
    ONNXAMP_RETURN_IF_ERROR(store.LoadParam(i, graphs.params[i].initial));
  }

  SamplerOptions sampling;
  sampling.batch_size = options.batch_size;
  sampling.seed = options.seed;
  sampling.last_batch = options.last_batch;
  sampling.shuffle = options.shuffle;
  ONNXAMP_ASSIGN_OR_RETURN(Sampler sampler, Sampler::Create(train.num_samples(), sampling));
  const int64_t micro_per_epoch = sampler.BatchesPerEpoch();
  int64_t total = options.steps;
  if (total <= 0) total = (options.epochs * micro_per_epoch + options.accumulate - 1) / options.accumulate;

  LrScheduleOptions schedule_options = options.schedule;
  // The decaying schedules run over the whole run unless told otherwise.
  if (schedule_options.kind != LrScheduleKind::kConstant && schedule_options.kind != LrScheduleKind::kStep &&
      schedule_options.total_steps <= 0) {
    schedule_options.total_steps = total;
  }
  ONNXAMP_ASSIGN_OR_RETURN(LrSchedule schedule, LrSchedule::Create(schedule_options));

  GradScalerOptions scaler_options = options.scaler;
  if (scaler_options.mode == LossScaleMode::kDynamic && options.graph.amp != DType::kFloat16) {
    // FP32 and BF16 train without loss scaling unless a static scale was asked for (BF16 has FP32's range).
    scaler_options.mode = LossScaleMode::kDisabled;
  }
  ONNXAMP_ASSIGN_OR_RETURN(GradScaler scaler, GradScaler::Create(scaler_options));

  std::unique_ptr<Trainer> t(new Trainer(options, std::move(train), std::move(graphs), std::move(store),
                                         std::move(scaler), std::move(schedule), std::move(sampler)));
  t->total_steps_ = total;
  ONNXAMP_ASSIGN_OR_RETURN(t->optimizer_, MakeOptimizer(options.optimizer, options));
  ONNXAMP_ASSIGN_OR_RETURN(t->param_groups_, ParameterGroupsOf(options, t->graphs_));
  t->optimizer_->SetGroups(t->param_groups_);
  for (const Buffer& b : t->graphs_.buffers) {
    ir::Tensor v = b.initial;
    v.set_name(b.name);
    t->buffers_.push_back(std::move(v));
  }
  if (options.averaging()) {
    // The averages start as the initial values (timm's ModelEma), the parameters' in the store with the optimizer's
    // state, so that checkpoints and the device mirror carry them.
    float* ema = t->store_.EnsureState(kEmaState);
    for (size_t i = 0; i < t->store_.size(); ++i) {
      const std::span<const float> p = t->store_.param(i);
      std::copy(p.begin(), p.end(), ema + t->store_.offset(i));
    }
    for (const ir::Tensor& b : t->buffers_) t->ema_buffers_.push_back(OwnedCopy(b));
  }
  t->last_drain_ = std::chrono::steady_clock::now();
  if (options.profile) t->profile_ = std::make_unique<StepProfile>(t->graphs_);
  if (options.device != exec::Device::kCpu) {
    const DeviceTrainingFactory factory = FindDeviceTraining(options.device);
    if (!factory) {
      return FailedPrecondition("training on ", exec::DeviceName(options.device),
                                " is not available: this onnxamp was built without it");
    }
    // The device's step reads the schedule's length and the scaler's mode as this trainer settled them.
    TrainerOptions device_options = t->options_;
    device_options.schedule = schedule_options;
    device_options.scaler = scaler_options;
    ONNXAMP_ASSIGN_OR_RETURN(t->device_, factory(device_options, t->graphs_, t->train_));
    ONNXAMP_RETURN_IF_ERROR(t->ReleaseInitialValues());
    return t;
  }
  exec::SessionOptions session;
  session.num_threads = options.threads;
  session.seed = options.seed;
  // Mixed precision: the forward passes read low-precision copies of the weights, rewritten after each optimizer
  // step, instead of casting the master weights on every run (every micro-batch and every evaluation batch).
  ir::Model train_model = converter::CloneModel(t->graphs_.train);
  ir::Model eval_model = converter::CloneModel(t->graphs_.eval);
  t->train_low_ = ExternalizeWeightCasts(train_model, t->graphs_.params, options.graph.amp);
  t->eval_low_ = ExternalizeWeightCasts(eval_model, t->graphs_.params, options.graph.amp);
  t->low_copies_.resize(t->graphs_.params.size());
  for (const auto* list : {&t->train_low_, &t->eval_low_}) {
    for (const LowPrecisionWeight& w : *list) {
      if (!t->low_copies_[w.param].has_data()) {
        t->low_copies_[w.param] = ir::Tensor(options.graph.amp, t->store_.dims(w.param));
      }
    }
  }
  t->RefreshLowPrecisionCopies();
  // The training graph's parameters are graph inputs bound on every step: no pass may fuse them into constants.
  exec::SessionOptions train_options = session;
  train_options.mode = exec::SessionMode::kTraining;
  train_options.finalize_graph =
      RecomputeHook(t->graphs_.train, t->graphs_.loss_scale, options.graph.recompute, &t->recompute_);
  StatusOr<std::unique_ptr<exec::Session>> train_session = exec::Session::Create(std::move(train_model), train_options);
  if (!train_session.ok()) return train_session.status().WithContext("the training graph");
  t->train_session_ = std::move(train_session).value();
  // The step's element loops (optimizer, moving average, weight copies) run on the training session's threads.
  t->optimizer_->SetThreadPool(t->pool());
  StatusOr<std::unique_ptr<exec::Session>> eval_session = exec::Session::Create(std::move(eval_model), session);
  if (!eval_session.ok()) return eval_session.status().WithContext("the evaluation graph");
  t->eval_session_ = std::move(eval_session).value();
  ONNXAMP_RETURN_IF_ERROR(t->ReleaseInitialValues());
  return t;
}

const RecomputeReport& Trainer::recompute_report() const { return device_ ? device_->recompute_report() : recompute_; }

Status Trainer::ReleaseInitialValues() {
  for (Parameter& p : graphs_.params) {
    ONNXAMP_ASSIGN_OR_RETURN(p.initial, ShellOf(p.initial));
  }
  return Status::Ok();
}

std::vector<ir::Tensor> Trainer::Feeds(std::vector<ir::Tensor> batch, const std::vector<ir::Tensor>& buffers,
                                       const std::vector<LowPrecisionWeight>& low) const {
  std::vector<ir::Tensor> feeds = std::move(batch);
  if (!graphs_.labels.empty() && !feeds.empty()) feeds.back().set_name(graphs_.labels);
  for (size_t i = 0; i < store_.size(); ++i) feeds.push_back(store_.ParamView(i));
  for (const ir::Tensor& b : buffers) feeds.push_back(b);
  for (const LowPrecisionWeight& w : low) {
    ir::Tensor copy = low_copies_[w.param];  // shares the buffer
    copy.set_name(w.input);
    feeds.push_back(std::move(copy));
  }
  return feeds;
}

void Trainer::RefreshLowPrecisionCopies() {
  for (size_t i = 0; i < low_copies_.size(); ++i) {
    ir::Tensor& c = low_copies_[i];
    if (!c.has_data()) continue;
    // The conversions of the Cast kernel (runtime/ops/cast): the same bits as the Casts these copies replace.
    const float* p = store_.param(i).data();
    const bool half = c.dtype() == DType::kFloat16;
    void* dst = c.mutable_data();
    ForRanges(pool(), store_.numel(i), [&](size_t b, size_t e) {
      const auto n = static_cast<int64_t>(e - b);
      if (half) {
        ops::FloatToHalf(p + b, static_cast<Float16*>(dst) + b, n);
      } else {
        ops::FloatToBFloat16(p + b, static_cast<BFloat16*>(dst) + b, n);
      }
    });
  }
}

void Trainer::UpdateEma() {
  const float w = optim_math::AverageWeight(options_.ema_decay, options_.ema_warmup, options_.swa_start, steps_taken_);
  if (w == 0.0f) return;  // stochastic weight averaging before its start: the averages stay, no pass over them
  float* ema = store_.FindState(kEmaState);
  for (size_t i = 0; i < store_.size(); ++i) {
    const float* p = store_.param(i).data();
    float* e = ema + store_.offset(i);
    ForRanges(pool(), store_.numel(i), [&](size_t b, size_t end) {
      for (size_t j = b + optim_simd::LerpSteps(e + b, p + b, end - b, w); j < end; ++j) {
        e[j] = optim_math::Lerp(e[j], p[j], w);
      }
    });
  }
  for (size_t b = 0; b < buffers_.size(); ++b) {
    ir::Tensor& e = ema_buffers_[b];
    if (e.dtype() == DType::kFloat32) {
      const std::span<const float> v = buffers_[b].values<float>();
      const std::span<float> a = e.mutable_values<float>();
      for (size_t j = optim_simd::LerpSteps(a.data(), v.data(), a.size(), w); j < a.size(); ++j) {
        a[j] = optim_math::Lerp(a[j], v[j], w);
      }
    } else if (e.nbytes()) {
      std::memcpy(e.mutable_data(), buffers_[b].data(), e.nbytes());  // a count: the live value
    }
  }
}

void Trainer::SwapEma() {
  float* ema = store_.FindState(kEmaState);
  for (size_t i = 0; i < store_.size(); ++i) {
    const std::span<float> p = store_.param(i);
    std::swap_ranges(p.begin(), p.end(), ema + store_.offset(i));
  }
  std::swap(buffers_, ema_buffers_);
  RefreshLowPrecisionCopies();
}

bool Trainer::Done() const { return steps_done_ >= total_steps_; }

Status Trainer::CheckLoss(const StepRecord& rec) const {
  if (!std::isfinite(rec.loss) && (!scaler_.enabled() || (scaler_.mode() == LossScaleMode::kStatic && rec.step == 1))) {
    return FailedPrecondition("step ", rec.step, ": the loss is ", rec.loss,
                              scaler_.enabled() ? " with the static loss scale " : " in ",
                              scaler_.enabled() ? StrCat(rec.loss_scale) : "FP32 training",
                              ": check the data and lower the learning rate or the loss scale");
  }
  return Status::Ok();
}

StatusOr<StepRecord> Trainer::Step() {
  if (!device_) return StepOnCpu();
  ONNXAMP_RETURN_IF_ERROR(StepAsync());
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<StepRecord> records, Drain());
  return records.back();
}

Status Trainer::StepAsync() {
  if (!device_) {
    ONNXAMP_ASSIGN_OR_RETURN(StepRecord rec, StepOnCpu());
    pending_.push_back(rec);
    return Status::Ok();
  }
  const auto start = std::chrono::steady_clock::now();
  const bool profiling = profile_ && profile_->BeginStep();
  if (profile_) device_->SetProfile(profiling ? profile_.get() : nullptr);
  StepRecord rec;
  rec.step = steps_done_ + 1;
  std::vector<std::vector<int64_t>> micro_batches;
  for (int m = 0; m < options_.accumulate; ++m) {
    Batch batch = sampler_.Next();
    rec.epoch = batch.epoch;
    rec.samples += static_cast<int64_t>(batch.indices.size());
    micro_batches.push_back(std::move(batch.indices));
  }
  Status st = device_->Step(micro_batches, rng_step_);
  if (!st.ok()) return st.WithContext(StrCat("step ", rec.step));
  rng_step_ += static_cast<uint64_t>(options_.accumulate);
  ++steps_done_;
  pending_.push_back(rec);
  if (profiling) profile_->EndStep(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return Status::Ok();
}

StatusOr<std::vector<StepRecord>> Trainer::Drain() {
  std::vector<StepRecord> records = std::move(pending_);
  pending_.clear();
  const auto now = std::chrono::steady_clock::now();
  const double span = std::chrono::duration<double>(now - last_drain_).count();
  last_drain_ = now;
  if (!device_) return records;
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<DeviceStepResult> results, device_->Drain());
  if (results.size() != records.size()) {
    return Internal("the device recorded ", results.size(), " steps where ", records.size(), " were queued");
  }
  for (size_t i = 0; i < records.size(); ++i) {
    StepRecord& rec = records[i];
    const DeviceStepResult& r = results[i];
    rec.loss = r.loss;
    rec.loss_scale = r.loss_scale;
    rec.skipped = r.skipped;
    rec.lr = r.lr;
    rec.grad_norm = r.skipped ? -1 : r.grad_norm;
    rec.seconds = span / static_cast<double>(records.size());
    ONNXAMP_RETURN_IF_ERROR(CheckLoss(rec));
    if (r.norm_error) {
      return FailedPrecondition("step ", rec.step,
                                ": the global gradient norm is not finite although every gradient is (the sum of "
                                "squares overflowed float32); nothing was clipped or updated");
    }
    if (r.skipped) {
      ++skipped_;
    } else {
      ++steps_taken_;
    }
    rec.skipped_total = skipped_;
  }
  return records;
}

Status Trainer::SyncFromDevice() {
  if (!device_) return Status::Ok();
  if (!pending_.empty()) return FailedPrecondition("SyncFromDevice: ", pending_.size(), " steps not drained");
  std::optional<GradScalerState> scaler;
  int64_t taken = 0;
  ONNXAMP_RETURN_IF_ERROR(device_->Download(&store_, &buffers_, &ema_buffers_, &scaler, &taken));
  if (taken != steps_taken_) return Internal("the device took ", taken, " steps where the records say ", steps_taken_);
  if (scaler) ONNXAMP_RETURN_IF_ERROR(scaler_.Restore(*scaler));
  if (taken > 0) ONNXAMP_RETURN_IF_ERROR(optimizer_->RestoreStepCounts(std::vector<int64_t>(store_.size(), taken)));
  return Status::Ok();
}

std::string Trainer::DeviceDescription() const { return device_ ? device_->Describe() : "cpu"; }

uint64_t Trainer::peak_device_bytes() const { return device_ ? device_->peak_device_bytes() : 0; }

uint64_t Trainer::peak_reserved_device_bytes() const { return device_ ? device_->peak_reserved_device_bytes() : 0; }

DeviceGraphStats Trainer::device_graph_stats() const { return device_ ? device_->graph_stats() : DeviceGraphStats{}; }

StatusOr<StepRecord> Trainer::StepOnCpu() {
  const auto start = std::chrono::steady_clock::now();
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  const bool profiling = profile_ && profile_->BeginStep();
  StepRecord rec;
  rec.step = steps_done_ + 1;
  rec.loss_scale = scaler_.scale();
  rec.lr = schedule_.LrAt(steps_taken_);
  // Micro-batches: the loss is divided by their number (through the seed), the running statistics chain from one to
  // the next and stay pending until the step is taken. The first one's gradients are computed straight into the
  // store's gradient buffer (RunOptions::output_into: no gradient outputs of its own, no copy); one that did not land
  // there is copied in. Later micro-batches add theirs.
  std::vector<ir::Tensor> pending = buffers_;
  double loss_sum = 0;
  exec::RunOptions run;
  run.fetch = {graphs_.loss};
  run.output_into = {ir::Tensor()};
  for (size_t i = 0; i < graphs_.params.size(); ++i) {
    run.fetch.push_back(graphs_.params[i].gradient);
    run.output_into.push_back(store_.GradView(i));
  }
  for (const Buffer& b : graphs_.buffers) {
    if (b.updated.empty()) continue;
    run.fetch.push_back(b.updated);
    run.output_into.push_back(ir::Tensor());
  }
  run.profile = profiling;
  exec::RunStats stats;
  const float seed = rec.loss_scale / static_cast<float>(options_.accumulate);
  for (int m = 0; m < options_.accumulate; ++m) {
    const auto data_start = Clock::now();
    const Batch batch = sampler_.Next();
    rec.epoch = batch.epoch;
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> arrays, MakeBatch(train_, batch.indices));
    std::vector<ir::Tensor> feeds = Feeds(std::move(arrays), pending, train_low_);
    feeds.push_back(FloatScalar(seed, graphs_.loss_scale));
    run.rng_step = rng_step_++;
    if (profiling) profile_->AddData(since(data_start));
    const auto run_start = Clock::now();
    StatusOr<std::vector<ir::Tensor>> out = train_session_->Run(feeds, run, profiling ? &stats : nullptr);
    if (!out.ok()) return out.status().WithContext(StrCat("step ", rec.step));
    if (profiling) profile_->AddRun(stats.nodes, since(run_start));
    const auto accumulate_start = Clock::now();
    const double loss = ScalarOf((*out)[0]);
    const int64_t n = static_cast<int64_t>(batch.indices.size());
    loss_sum += loss * static_cast<double>(n);
    rec.samples += n;
    for (size_t i = 0; i < graphs_.params.size(); ++i) {
      const ir::Tensor& g = (*out)[1 + i];
      if (m > 0) {
        ONNXAMP_RETURN_IF_ERROR(store_.AccumulateGrad(i, g));
      } else if (g.on_host() && g.data() == static_cast<const void*>(store_.grad(i).data())) {
        store_.set_has_grad(i, true);
      } else {
        ONNXAMP_RETURN_IF_ERROR(store_.SetGrad(i, g));
      }
    }
    run.output_into.clear();
    size_t k = 1 + graphs_.params.size();
    for (size_t b = 0; b < graphs_.buffers.size(); ++b) {
      if (graphs_.buffers[b].updated.empty()) continue;
      pending[b] = (*out)[k++];
      pending[b].set_name(graphs_.buffers[b].name);
    }
    if (profiling) profile_->AddOptimizer(since(accumulate_start));
  }
  rec.loss = rec.samples ? loss_sum / static_cast<double>(rec.samples) : 0;
  ONNXAMP_RETURN_IF_ERROR(CheckLoss(rec));
  const auto optimizer_start = Clock::now();
  const bool found_inf = scaler_.UnscaleAndCheck(store_, pool());
  rec.skipped = found_inf;
  if (!found_inf) {
    if (options_.clip_norm > 0) {
      StatusOr<float> norm = ClipGradNorm(store_, options_.clip_norm);
      if (!norm.ok()) return norm.status().WithContext(StrCat("step ", rec.step));
      rec.grad_norm = *norm;
    } else if (options_.clip_value > 0) {
      ONNXAMP_RETURN_IF_ERROR(ClipGradValue(store_, options_.clip_value, pool()));
    }
    ONNXAMP_RETURN_IF_ERROR(optimizer_->Step(store_, rec.lr));
    RefreshLowPrecisionCopies();
    buffers_ = std::move(pending);
    if (options_.averaging()) UpdateEma();
    ++steps_taken_;
  } else {
    ++skipped_;
  }
  scaler_.Update(found_inf);
  ++steps_done_;
  rec.skipped_total = skipped_;
  rec.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (profiling) {
    profile_->AddOptimizer(since(optimizer_start));
    profile_->EndStep(rec.seconds);
  }
  return rec;
}

StatusOr<EvalRecord> Trainer::Evaluate(const Dataset& data) {
  if (!options_.averaging()) return EvaluateCurrent(data);
  // The averages take the live values' place for the evaluation, and give it back whatever it returned.
  auto swap = [&]() -> Status {
    if (device_) return device_->SwapEma();
    SwapEma();
    return Status::Ok();
  };
  ONNXAMP_RETURN_IF_ERROR(swap());
  StatusOr<EvalRecord> rec = EvaluateCurrent(data);
  ONNXAMP_RETURN_IF_ERROR(swap());
  return rec;
}

StatusOr<EvalRecord> Trainer::EvaluateCurrent(const Dataset& data) {
  EvalRecord rec;
  exec::RunOptions run;
  run.fetch = {graphs_.loss, graphs_.prediction};
  const bool classes = LossTakesClassLabels(options_.graph.loss.kind);
  double loss_sum = 0;
  int64_t correct = 0, correct_k = 0, counted = 0;
  for (int64_t begin = 0; begin < data.num_samples(); begin += options_.batch_size) {
    std::vector<int64_t> indices;
    for (int64_t i = begin; i < std::min(data.num_samples(), begin + options_.batch_size); ++i) indices.push_back(i);
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> arrays, MakeBatch(data, indices));
    const ir::Tensor labels = arrays.empty() ? ir::Tensor() : arrays.back();
    StatusOr<std::vector<ir::Tensor>> out =
        device_ ? device_->EvalBatch(arrays) : eval_session_->Run(Feeds(std::move(arrays), buffers_, eval_low_), run);
    if (!out.ok()) return out.status().WithContext("evaluating");
    loss_sum += ScalarOf((*out)[0]) * static_cast<double>(indices.size());
    rec.samples += static_cast<int64_t>(indices.size());
    if (classes) {
      CountCorrect((*out)[1], labels, options_.graph.loss.class_axis, options_.graph.loss.ignore_index,
                   std::max<int64_t>(options_.top_k, 1), &correct, &correct_k, &counted);
    }
  }
  rec.loss = rec.samples ? loss_sum / static_cast<double>(rec.samples) : 0;
  if (classes && counted > 0) {
    rec.accuracy = static_cast<double>(correct) / static_cast<double>(counted);
    if (options_.top_k > 1) {
      rec.top_k = options_.top_k;
      rec.top_k_accuracy = static_cast<double>(correct_k) / static_cast<double>(counted);
    }
  }
  return rec;
}

StatusOr<bool> Trainer::ReportMetric(double metric) {
  LrSchedule schedule = schedule_;
  if (!schedule.ReportMetric(metric)) {
    schedule_ = std::move(schedule);  // the counters moved on
    return false;
  }
  if (device_) ONNXAMP_RETURN_IF_ERROR(device_->SetSchedule(schedule));
  schedule_ = std::move(schedule);
  return true;
}

TrainerState Trainer::StateView() const {
  TrainerState s;
  s.steps_done = steps_done_;
  s.steps_taken = steps_taken_;
  s.skipped = skipped_;
  s.rng_step = rng_step_;
  s.cursor = sampler_.cursor();
  s.scaler = scaler_.State();
  s.step_counts = optimizer_->step_counts();
  for (size_t i = 0; i < store_.size(); ++i) s.params.push_back(store_.ParamView(i));
  for (const std::string& name : store_.state_names()) {
    std::vector<ir::Tensor> per_param;
    for (size_t i = 0; i < store_.size(); ++i) {
      StatusOr<ir::Tensor> view = store_.StateView(name, i);
      ONNXAMP_CHECK(view.ok(), "a listed optimizer state has no buffer");
      view->set_name(store_.name(i));
      per_param.push_back(std::move(view).value());
    }
    s.optimizer_state.emplace_back(name, std::move(per_param));
  }
  if (options_.schedule.kind == LrScheduleKind::kPlateau) s.plateau = schedule_.plateau();
  s.buffers = buffers_;          // a step replaces buffers_ with new tensors: these stay as they are
  s.ema_buffers = ema_buffers_;  // updated in place by the next step
  return s;
}

TrainerState Trainer::State() const {
  TrainerState s = StateView();
  for (ir::Tensor& t : s.params) t = OwnedCopy(t);
  for (auto& [name, per_param] : s.optimizer_state) {
    for (ir::Tensor& t : per_param) t = OwnedCopy(t);
  }
  for (ir::Tensor& t : s.ema_buffers) t = OwnedCopy(t);
  return s;
}

Status Trainer::Restore(const TrainerState& state) {
  // Everything is checked before anything changes.
  auto check = [](const ir::Tensor& t, const std::string& name, const std::vector<int64_t>& dims,
                  const std::string& what) -> Status {
    if (t.name() != name) return InvalidArgument(what, " '", t.name(), "' where '", name, "' was expected");
    if (t.dtype() != DType::kFloat32 || t.dims() != dims) {
      return InvalidArgument(what, " '", name, "' is ", DTypeName(t.dtype()), " ", ops::ShapeToString(t.dims()),
                             ", expected float32 ", ops::ShapeToString(dims));
    }
    return Status::Ok();
  };
  // The options match the checkpoint's (CheckResume), so other parameters come from a file they name.
  constexpr const char* kOtherChoice =
      " (this run chooses other parameters than the one that wrote the state: did a --trainable or --freeze file "
      "change?)";
  if (state.params.size() != store_.size()) {
    return InvalidArgument("the state has ", state.params.size(), " parameters, this run ", store_.size(),
                           kOtherChoice);
  }
  for (size_t i = 0; i < store_.size(); ++i) {
    if (state.params[i].name() != store_.name(i)) {
      return InvalidArgument("parameter '", state.params[i].name(), "' where '", store_.name(i), "' was expected",
                             kOtherChoice);
    }
    ONNXAMP_RETURN_IF_ERROR(check(state.params[i], store_.name(i), store_.dims(i), "parameter"));
  }
  std::vector<std::string> known = optimizer_->state_names();
  const bool ema = options_.averaging();
  if (ema) known.push_back(kEmaState);
  bool has_ema = false;
  for (const auto& [name, tensors] : state.optimizer_state) {
    if (name == kEmaState && !ema) {
      return InvalidArgument(
          "the state has a moving average of the weights and this run keeps none (--ema or --swa-start)");
    }
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return InvalidArgument("optimizer state '", name, "' is not kept by ", optimizer_->name());
    }
    has_ema = has_ema || name == kEmaState;
    if (tensors.size() != store_.size()) {
      return InvalidArgument("optimizer state '", name, "' has ", tensors.size(), " tensors, the model ", store_.size(),
                             " parameters");
    }
    for (size_t i = 0; i < store_.size(); ++i) {
      ONNXAMP_RETURN_IF_ERROR(check(tensors[i], store_.name(i), store_.dims(i), StrCat("optimizer state ", name)));
    }
  }
  if (!state.step_counts.empty() && state.step_counts.size() != store_.size()) {
    return InvalidArgument("the state has ", state.step_counts.size(), " step counts, the model ", store_.size(),
                           " parameters");
  }
  if (state.buffers.size() != buffers_.size()) {
    return InvalidArgument("the state has ", state.buffers.size(), " buffers, the model ", buffers_.size());
  }
  if (ema && !has_ema)
    return InvalidArgument("the state has no moving average of the weights for --ema or --swa-start");
  if (state.ema_buffers.size() != ema_buffers_.size()) {
    return InvalidArgument("the state has moving averages of ", state.ema_buffers.size(), " buffers, this run ",
                           ema_buffers_.size());
  }
  // Buffers (or their averages) named, typed and shaped as the trainer's; `what` starts the error.
  auto same_buffers = [](const std::vector<ir::Tensor>& given, const std::vector<ir::Tensor>& current,
                         const char* what) -> Status {
    for (size_t b = 0; b < current.size(); ++b) {
      const ir::Tensor& cur = current[b];
      if (given[b].name() != cur.name() || given[b].dtype() != cur.dtype() || given[b].dims() != cur.dims()) {
        return InvalidArgument(what, "'", given[b].name(), "' does not match the model's buffer '", cur.name(), "'");
      }
    }
    return Status::Ok();
  };
  ONNXAMP_RETURN_IF_ERROR(same_buffers(state.ema_buffers, ema_buffers_, "the moving average of buffer "));
  ONNXAMP_RETURN_IF_ERROR(same_buffers(state.buffers, buffers_, "buffer "));
  if (state.steps_done < 0 || state.steps_taken < 0 || state.skipped < 0 ||
      state.steps_taken + state.skipped != state.steps_done) {
    return InvalidArgument("inconsistent step counts: ", state.steps_done, " done, ", state.steps_taken, " taken, ",
                           state.skipped, " skipped");
  }
  if (state.scaler.has_value() != scaler_.enabled()) {
    return InvalidArgument(state.scaler ? "the state has a loss scale and this run does not scale the loss"
                                        : "the state has no loss scale and this run scales the loss");
  }
  // The parts that validate themselves, on copies, so that an error leaves the trainer as it was.
  Sampler sampler = sampler_;
  ONNXAMP_RETURN_IF_ERROR(sampler.Seek(state.cursor));
  GradScaler scaler = scaler_;
  if (state.scaler) ONNXAMP_RETURN_IF_ERROR(scaler.Restore(*state.scaler));
  const bool plateau = options_.schedule.kind == LrScheduleKind::kPlateau;
  if (state.plateau.has_value() != plateau) {
    return InvalidArgument(plateau ? "the state has no plateau schedule for --schedule plateau"
                                   : "the state has a plateau schedule and this run's schedule is another");
  }
  LrSchedule schedule = schedule_;
  if (state.plateau) ONNXAMP_RETURN_IF_ERROR(schedule.RestorePlateau(*state.plateau));
  ONNXAMP_RETURN_IF_ERROR(optimizer_->RestoreStepCounts(state.step_counts));

  sampler_ = std::move(sampler);
  scaler_ = std::move(scaler);
  schedule_ = std::move(schedule);
  for (size_t i = 0; i < store_.size(); ++i) ONNXAMP_RETURN_IF_ERROR(store_.LoadParam(i, state.params[i]));
  RefreshLowPrecisionCopies();
  for (const auto& [name, tensors] : state.optimizer_state) {
    float* flat = store_.EnsureState(name);
    for (size_t i = 0; i < store_.size(); ++i) {
      std::copy_n(tensors[i].values<float>().data(), store_.numel(i), flat + store_.offset(i));
    }
  }
  for (size_t b = 0; b < buffers_.size(); ++b) {
    // Copied: the state's tensors may be views of a mapped checkpoint, which must not outlive the restore.
    buffers_[b] = OwnedCopy(state.buffers[b]);
    buffers_[b].set_name(graphs_.buffers[b].name);
  }
  for (size_t b = 0; b < ema_buffers_.size(); ++b) {
    ema_buffers_[b] = OwnedCopy(state.ema_buffers[b]);
    ema_buffers_[b].set_name(graphs_.buffers[b].name);
  }
  steps_done_ = state.steps_done;
  steps_taken_ = state.steps_taken;
  skipped_ = state.skipped;
  rng_step_ = state.rng_step;
  if (device_) {
    // The device keeps one step count for all parameters (they are updated together).
    for (int64_t c : state.step_counts) {
      if (c != state.steps_taken) {
        return InvalidArgument("the state's per-parameter step counts differ from its ", state.steps_taken,
                               " steps taken; device training updates every parameter on every step");
      }
    }
    ONNXAMP_RETURN_IF_ERROR(
        device_->Upload(store_, buffers_, ema_buffers_, scaler_.State(), steps_done_, steps_taken_, skipped_));
    if (plateau) ONNXAMP_RETURN_IF_ERROR(device_->SetSchedule(schedule_));
  }
  return Status::Ok();
}

std::vector<ir::Tensor> Trainer::TrainedValues() const {
  std::vector<ir::Tensor> values;
  for (size_t i = 0; i < store_.size(); ++i) values.push_back(store_.ReadParam(i));
  for (const ir::Tensor& b : buffers_) values.push_back(b);
  return values;
}

std::vector<ir::Tensor> Trainer::ExportValues() const {
  if (!options_.averaging()) return TrainedValues();
  std::vector<ir::Tensor> values;
  const float* ema = store_.FindState(kEmaState);
  for (size_t i = 0; i < store_.size(); ++i) {
    ir::Tensor t(DType::kFloat32, store_.dims(i));
    std::copy_n(ema + store_.offset(i), store_.numel(i), t.mutable_values<float>().data());
    t.set_name(store_.name(i));
    values.push_back(std::move(t));
  }
  for (const ir::Tensor& b : ema_buffers_) values.push_back(OwnedCopy(b));
  return values;
}

}  // namespace onnxamp::trainer
