// Trainer: sessions over the training graphs, and the step (micro-batches, unscale and inf check, clip, optimizer,
// schedule, buffers, scaler update) in the order PyTorch's AMP recipe runs it.
#include "trainer/trainer.h"

#include <chrono>
#include <cmath>

#include "converter/model_clone.h"
#include "trainer/optim/clip.h"

namespace onnxamp::trainer {
namespace {

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

// Correct predictions and counted positions of a classification batch: argmax over the class axis against the labels.
void CountCorrect(const ir::Tensor& pred, const ir::Tensor& labels, int64_t class_axis, int64_t ignore_index,
                  int64_t* correct, int64_t* counted) {
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
      int64_t best = 0;
      for (int64_t c = 1; c < classes; ++c) {
        if (p[(o * classes + c) * inner + i] > p[(o * classes + best) * inner + i]) best = c;
      }
      *correct += best == label;
      ++*counted;
    }
  }
}

}  // namespace

StatusOr<OptimizerKind> OptimizerKindFromName(const std::string& name) {
  if (name == "sgd") return OptimizerKind::kSgd;
  if (name == "adam") return OptimizerKind::kAdam;
  if (name == "adamw") return OptimizerKind::kAdamW;
  return InvalidArgument("--optimizer ", name, ": expected sgd, adam or adamw");
}

StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const ir::Model& model, const TrainerOptions& options,
                                                   Dataset train) {
  if (options.batch_size < 1) return InvalidArgument("--batch-size must be at least 1");
  if (options.accumulate < 1) return InvalidArgument("--accumulate must be at least 1");
  if (options.steps <= 0 && options.epochs <= 0) return InvalidArgument("give --steps or --epochs");
  ONNXAMP_ASSIGN_OR_RETURN(TrainingGraphs graphs, BuildTrainingGraphs(model, options.graph));

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
  if (schedule_options.kind == LrScheduleKind::kCosine && schedule_options.total_steps <= 0) {
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
  switch (options.optimizer) {
    case OptimizerKind::kSgd: {
      ONNXAMP_ASSIGN_OR_RETURN(t->optimizer_, MakeSgd(options.sgd));
      break;
    }
    case OptimizerKind::kAdam: {
      ONNXAMP_ASSIGN_OR_RETURN(t->optimizer_, MakeAdam(options.adam));
      break;
    }
    case OptimizerKind::kAdamW: {
      ONNXAMP_ASSIGN_OR_RETURN(t->optimizer_, MakeAdamW(options.adam));
      break;
    }
  }
  for (const Buffer& b : t->graphs_.buffers) {
    ir::Tensor v = b.initial;
    v.set_name(b.name);
    t->buffers_.push_back(std::move(v));
  }
  exec::SessionOptions session;
  session.num_threads = options.threads;
  session.seed = options.seed;
  StatusOr<std::unique_ptr<exec::Session>> train_session =
      exec::Session::Create(converter::CloneModel(t->graphs_.train), session);
  if (!train_session.ok()) return train_session.status().WithContext("the training graph");
  t->train_session_ = std::move(train_session).value();
  StatusOr<std::unique_ptr<exec::Session>> eval_session =
      exec::Session::Create(converter::CloneModel(t->graphs_.eval), session);
  if (!eval_session.ok()) return eval_session.status().WithContext("the evaluation graph");
  t->eval_session_ = std::move(eval_session).value();
  return t;
}

std::vector<ir::Tensor> Trainer::Feeds(std::vector<ir::Tensor> batch, const std::vector<ir::Tensor>& buffers) const {
  std::vector<ir::Tensor> feeds = std::move(batch);
  if (!graphs_.labels.empty() && !feeds.empty()) feeds.back().set_name(graphs_.labels);
  for (size_t i = 0; i < store_.size(); ++i) feeds.push_back(store_.ParamView(i));
  for (const ir::Tensor& b : buffers) feeds.push_back(b);
  return feeds;
}

bool Trainer::Done() const { return steps_done_ >= total_steps_; }

StatusOr<StepRecord> Trainer::Step() {
  const auto start = std::chrono::steady_clock::now();
  StepRecord rec;
  rec.step = steps_done_ + 1;
  rec.loss_scale = scaler_.scale();
  rec.lr = schedule_.LrAt(steps_taken_);
  store_.ZeroGrads();
  // Micro-batches: the loss is divided by their number (through the seed), the running statistics chain from one to
  // the next and stay pending until the step is taken.
  std::vector<ir::Tensor> pending = buffers_;
  double loss_sum = 0;
  exec::RunOptions run;
  run.fetch = {graphs_.loss};
  for (const Parameter& p : graphs_.params) run.fetch.push_back(p.gradient);
  for (const Buffer& b : graphs_.buffers) {
    if (!b.updated.empty()) run.fetch.push_back(b.updated);
  }
  const float seed = rec.loss_scale / static_cast<float>(options_.accumulate);
  for (int m = 0; m < options_.accumulate; ++m) {
    const Batch batch = sampler_.Next();
    rec.epoch = batch.epoch;
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> arrays, MakeBatch(train_, batch.indices));
    std::vector<ir::Tensor> feeds = Feeds(std::move(arrays), pending);
    feeds.push_back(FloatScalar(seed, graphs_.loss_scale));
    run.rng_step = rng_step_++;
    StatusOr<std::vector<ir::Tensor>> out = train_session_->Run(feeds, run);
    if (!out.ok()) return out.status().WithContext(StrCat("step ", rec.step));
    const double loss = ScalarOf((*out)[0]);
    const int64_t n = static_cast<int64_t>(batch.indices.size());
    loss_sum += loss * static_cast<double>(n);
    rec.samples += n;
    for (size_t i = 0; i < graphs_.params.size(); ++i) {
      ONNXAMP_RETURN_IF_ERROR(store_.AccumulateGrad(i, (*out)[1 + i]));
    }
    size_t k = 1 + graphs_.params.size();
    for (size_t b = 0; b < graphs_.buffers.size(); ++b) {
      if (graphs_.buffers[b].updated.empty()) continue;
      pending[b] = (*out)[k++];
      pending[b].set_name(graphs_.buffers[b].name);
    }
  }
  rec.loss = rec.samples ? loss_sum / static_cast<double>(rec.samples) : 0;
  if (!std::isfinite(rec.loss) && (!scaler_.enabled() || (scaler_.mode() == LossScaleMode::kStatic && rec.step == 1))) {
    return FailedPrecondition("step ", rec.step, ": the loss is ", rec.loss,
                              scaler_.enabled() ? " with the static loss scale " : " in ",
                              scaler_.enabled() ? StrCat(rec.loss_scale) : "FP32 training",
                              ": check the data and lower the learning rate or the loss scale");
  }
  const bool found_inf = scaler_.UnscaleAndCheck(store_);
  rec.skipped = found_inf;
  if (!found_inf) {
    if (options_.clip_norm > 0) {
      StatusOr<float> norm = ClipGradNorm(store_, options_.clip_norm);
      if (!norm.ok()) return norm.status().WithContext(StrCat("step ", rec.step));
      rec.grad_norm = *norm;
    }
    ONNXAMP_RETURN_IF_ERROR(optimizer_->Step(store_, rec.lr));
    ++steps_taken_;
    buffers_ = std::move(pending);
  } else {
    ++skipped_;
  }
  scaler_.Update(found_inf);
  ++steps_done_;
  rec.skipped_total = skipped_;
  rec.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return rec;
}

StatusOr<EvalRecord> Trainer::Evaluate(const Dataset& data) {
  EvalRecord rec;
  exec::RunOptions run;
  run.fetch = {graphs_.loss, graphs_.prediction};
  const bool classes = LossTakesClassLabels(options_.graph.loss.kind);
  double loss_sum = 0;
  int64_t correct = 0, counted = 0;
  for (int64_t begin = 0; begin < data.num_samples(); begin += options_.batch_size) {
    std::vector<int64_t> indices;
    for (int64_t i = begin; i < std::min(data.num_samples(), begin + options_.batch_size); ++i) indices.push_back(i);
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> arrays, MakeBatch(data, indices));
    const ir::Tensor labels = arrays.empty() ? ir::Tensor() : arrays.back();
    StatusOr<std::vector<ir::Tensor>> out = eval_session_->Run(Feeds(std::move(arrays), buffers_), run);
    if (!out.ok()) return out.status().WithContext("evaluating");
    loss_sum += ScalarOf((*out)[0]) * static_cast<double>(indices.size());
    rec.samples += static_cast<int64_t>(indices.size());
    if (classes) {
      CountCorrect((*out)[1], labels, options_.graph.loss.class_axis, options_.graph.loss.ignore_index, &correct,
                   &counted);
    }
  }
  rec.loss = rec.samples ? loss_sum / static_cast<double>(rec.samples) : 0;
  if (classes && counted > 0) rec.accuracy = static_cast<double>(correct) / static_cast<double>(counted);
  return rec;
}

std::vector<ir::Tensor> Trainer::TrainedValues() const {
  std::vector<ir::Tensor> values;
  for (size_t i = 0; i < store_.size(); ++i) values.push_back(store_.ReadParam(i));
  for (const ir::Tensor& b : buffers_) values.push_back(b);
  return values;
}

}  // namespace onnxamp::trainer
