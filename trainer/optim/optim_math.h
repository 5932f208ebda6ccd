// Per-element arithmetic of the GradScaler, the optimizers and clipping, in the order of float32 operations that
// PyTorch's CPU kernels use. The CPU loops call these functions; CUDA kernels include this header and call the very
// same functions (ONNXAMP_HOST_DEVICE), so both backends compute the same bits for the same scalars.
//
// Each function notes the PyTorch code it mirrors. The scalars (learning rate, bias corrections, ...) are computed
// on the host in double, as Python does, and rounded to float32 where ATen converts a Python number into a kernel
// argument (see the *Scalars structs and the functions that fill them).
//
// Where PyTorch's vectorised CPU kernels use a fused multiply-add (vec::fmadd: Tensor.add with alpha, Tensor.lerp),
// these functions call fmaf; everywhere else they round after every operation. That relies on the compiler not
// contracting a*b+c into an FMA on its own: true for this project's CPU flags (no -march, no -ffp-contract=fast with
// FMA available); a CUDA kernel that includes this header must be built with --fmad=false or accept differences of
// one ulp.
#pragma once

#include <cmath>
#include <cstdint>

#include "runtime/common/host_device.h"

namespace onnxamp::trainer::optim_math {

// True for finite floats; false for +-inf and NaN. (x - x is 0 exactly for every finite x, NaN otherwise.)
ONNXAMP_HOST_DEVICE inline bool IsFinite(float x) { return (x - x) == 0.0f; }

// ---- GradScaler ------------------------------------------------------------------------------------------------

// The inverse scale used to unscale gradients: GradScaler.unscale_ computes `self._scale.double().reciprocal()
// .float()`, the reciprocal in float64 rounded once to float32.
ONNXAMP_HOST_DEVICE inline float InverseScale(float scale) {
  return static_cast<float>(1.0 / static_cast<double>(scale));
}

// One element of _amp_foreach_non_finite_check_and_unscale_ (AmpGradScalerKernels.cpp, AmpKernels.cu): the element
// times inv_scale, except that an inv_scale of exactly 1 leaves the element as it is. The caller records found_inf
// when !IsFinite(g) (of the scaled value, before this multiplication).
ONNXAMP_HOST_DEVICE inline float UnscaleElement(float g, float inv_scale) {
  return inv_scale == 1.0f ? g : g * inv_scale;
}

// _amp_update_scale_ (CPU and CUDA kernels are identical): on found_inf the scale is multiplied by backoff_factor
// and the tracker reset; otherwise the tracker counts one more successful step and, when it reaches
// growth_interval, the scale is multiplied by growth_factor (kept only if that is finite) and the tracker reset.
// The products are float32 * float64 (the factors are Python floats) rounded once to float32.
//
// Beyond PyTorch: after a backoff the scale never goes below min_scale (0 = no floor, PyTorch's behaviour).
ONNXAMP_HOST_DEVICE inline void UpdateScale(float* scale, int32_t* growth_tracker, bool found_inf, double growth_factor,
                                            double backoff_factor, int32_t growth_interval, float min_scale) {
  if (found_inf) {
    float backed_off = static_cast<float>(static_cast<double>(*scale) * backoff_factor);
    *scale = backed_off < min_scale ? min_scale : backed_off;
    *growth_tracker = 0;
    return;
  }
  const int32_t successful = *growth_tracker + 1;
  if (successful == growth_interval) {
    const float grown = static_cast<float>(static_cast<double>(*scale) * growth_factor);
    if (IsFinite(grown)) *scale = grown;
    *growth_tracker = 0;
  } else {
    *growth_tracker = successful;
  }
}

// ---- Shared tensor-op mirrors ----------------------------------------------------------------------------------

// Tensor.add(other, alpha=a) on float32: vec::fmadd(other, alpha, self) in ufunc/add.h.
ONNXAMP_HOST_DEVICE inline float AddScaled(float self, float other, float alpha) { return fmaf(other, alpha, self); }

// Tensor.lerp_(end, weight) with a scalar weight: lerp_vec in cpu/LerpKernel.cpp (one FMA, from whichever end is
// nearer to the weight).
ONNXAMP_HOST_DEVICE inline float Lerp(float start, float end, float weight) {
  const bool small = fabsf(weight) < 0.5f;
  return small ? fmaf(weight, end - start, start) : fmaf(weight - 1.0f, end - start, end);
}

// torch.maximum: NaN in either operand gives NaN.
ONNXAMP_HOST_DEVICE inline float MaximumPropagateNan(float a, float b) { return (a != a || a > b) ? a : b; }

// exp_avg_sq.mul_(decay).addcmul_(g, g, value=one_minus_decay) in place (self * decay, then + value * g * g left to
// right): Adam's, RAdam's and RMSprop's squared-gradient average. Returns the new value.
ONNXAMP_HOST_DEVICE inline float SquareAverage(float* avg, float g, float decay, float one_minus_decay) {
  float v = *avg * decay;
  v = v + one_minus_decay * g * g;
  *avg = v;
  return v;
}

// ---- SGD -------------------------------------------------------------------------------------------------------

// Scalars of one SGD step (torch.optim.sgd._single_tensor_sgd), float32 as ATen passes them to its kernels.
struct SgdScalars {
  bool has_weight_decay = false;     // Python `weight_decay != 0`
  float weight_decay = 0.0f;         // alpha of grad.add(param, alpha=weight_decay)
  bool has_momentum = false;         // Python `momentum != 0`
  float momentum = 0.0f;             // buf.mul_(momentum); grad.add(buf, alpha=momentum) for Nesterov
  float one_minus_dampening = 1.0f;  // alpha of buf.add_(grad, alpha=1 - dampening), computed in double
  bool nesterov = false;
  float neg_lr = 0.0f;  // alpha of param.add_(grad, alpha=-lr)
};

// Fills SgdScalars from torch.optim.SGD's options and the step's learning rate: the options rounded to float32 as
// ATen receives them, 1 - dampening and -lr computed in double first.
inline SgdScalars ComputeSgdScalars(double lr, double momentum, double dampening, double weight_decay, bool nesterov) {
  SgdScalars s;
  s.has_weight_decay = weight_decay != 0.0;
  s.weight_decay = static_cast<float>(weight_decay);
  s.has_momentum = momentum != 0.0;
  s.momentum = static_cast<float>(momentum);
  s.one_minus_dampening = static_cast<float>(1.0 - dampening);
  s.nesterov = nesterov;
  s.neg_lr = static_cast<float>(-lr);
  return s;
}

// One element of SGD. `first_step` is PyTorch's `momentum_buffer is None`: the buffer then starts as a copy of the
// (decayed) gradient, without dampening.
ONNXAMP_HOST_DEVICE inline float SgdElement(float p, float g, float* momentum_buffer, bool first_step,
                                            const SgdScalars& s) {
  if (s.has_weight_decay) g = AddScaled(g, p, s.weight_decay);
  if (s.has_momentum) {
    const float buf = first_step ? g : AddScaled(*momentum_buffer * s.momentum, g, s.one_minus_dampening);
    *momentum_buffer = buf;
    g = s.nesterov ? AddScaled(g, buf, s.momentum) : buf;
  }
  return AddScaled(p, g, s.neg_lr);
}

// ---- Adam and AdamW --------------------------------------------------------------------------------------------

// Scalars of one Adam/AdamW step for one parameter (torch.optim.adam._single_tensor_adam, capturable=False).
struct AdamScalars {
  bool has_weight_decay = false;       // Python `weight_decay != 0`
  bool decoupled = false;              // AdamW: param.mul_(1 - lr * weight_decay) before the update
  float weight_decay = 0.0f;           // Adam: alpha of grad.add(param, alpha=weight_decay)
  float decay_factor = 1.0f;           // AdamW: (float)(1 - lr * weight_decay), computed in double
  float lerp_weight = 0.0f;            // exp_avg.lerp_(grad, 1 - beta1): (float)(1 - beta1)
  float beta2 = 0.0f;                  // exp_avg_sq.mul_(beta2)
  float one_minus_beta2 = 0.0f;        // .addcmul_(grad, grad, value=1 - beta2)
  float bias_correction2_sqrt = 1.0f;  // (float)((1 - beta2**step) ** 0.5)
  float eps = 0.0f;                    // denom.add_(eps)
  float neg_step_size = 0.0f;          // value of param.addcdiv_(exp_avg, denom, value=-step_size)
  bool amsgrad = false;
};

// Fills AdamScalars for a parameter that is about to take its `step`-th step (1 for the first), in float64 as
// Python does: bias_correction1 = 1 - beta1**step, step_size = lr / bias_correction1, bias_correction2_sqrt =
// (1 - beta2**step)**0.5. `step` goes through float32 first because PyTorch keeps state['step'] in a float32 tensor.
inline AdamScalars ComputeAdamScalars(double lr, double beta1, double beta2, double eps, double weight_decay,
                                      bool decoupled, bool amsgrad, int64_t step) {
  AdamScalars s;
  const double step_value = static_cast<double>(static_cast<float>(step));
  s.has_weight_decay = weight_decay != 0.0;
  s.decoupled = decoupled;
  s.weight_decay = static_cast<float>(weight_decay);
  s.decay_factor = static_cast<float>(1.0 - lr * weight_decay);
  s.lerp_weight = static_cast<float>(1.0 - beta1);
  s.beta2 = static_cast<float>(beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  const double bias_correction1 = 1.0 - std::pow(beta1, step_value);
  const double bias_correction2 = 1.0 - std::pow(beta2, step_value);
  const double step_size = lr / bias_correction1;
  s.bias_correction2_sqrt = static_cast<float>(std::pow(bias_correction2, 0.5));
  s.eps = static_cast<float>(eps);
  s.neg_step_size = static_cast<float>(-step_size);
  s.amsgrad = amsgrad;
  return s;
}

// One element of Adam/AdamW; updates exp_avg, exp_avg_sq (and max_exp_avg_sq with amsgrad) in place and returns the
// new parameter. Mirrors, in order: weight decay (decoupled: p * decay_factor; L2: grad + wd * p, one FMA),
// exp_avg.lerp_, exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value) (self + value * g * g, left to right),
// torch.maximum for amsgrad, denom = sqrt(v) / bias_correction2_sqrt + eps, param + (-step_size * m) / denom
// (addcdiv: self + value * t1 / t2, left to right).
ONNXAMP_HOST_DEVICE inline float AdamElement(float p, float g, float* exp_avg, float* exp_avg_sq, float* max_exp_avg_sq,
                                             const AdamScalars& s) {
  if (s.has_weight_decay) {
    if (s.decoupled) {
      p = p * s.decay_factor;
    } else {
      g = AddScaled(g, p, s.weight_decay);
    }
  }
  const float m = Lerp(*exp_avg, g, s.lerp_weight);
  *exp_avg = m;
  float v = SquareAverage(exp_avg_sq, g, s.beta2, s.one_minus_beta2);
  if (s.amsgrad) {
    v = MaximumPropagateNan(*max_exp_avg_sq, v);
    *max_exp_avg_sq = v;
  }
  const float denom = sqrtf(v) / s.bias_correction2_sqrt + s.eps;
  return p + s.neg_step_size * m / denom;
}

// ---- RMSprop ---------------------------------------------------------------------------------------------------

// Scalars of one RMSprop step (torch.optim.rmsprop._single_tensor_rmsprop), float32 as ATen passes them.
struct RmspropScalars {
  bool has_weight_decay = false;  // Python `weight_decay != 0`
  float weight_decay = 0.0f;      // alpha of grad.add(param, alpha=weight_decay)
  float alpha = 0.0f;             // square_avg.mul_(alpha); grad_avg.mul_(alpha) (centered)
  float one_minus_alpha = 0.0f;   // value of .addcmul_(grad, grad, value=1 - alpha); grad_avg.lerp_(grad, 1 - alpha)
  float eps = 0.0f;               // avg.add_(eps)
  bool centered = false;
  bool has_momentum = false;  // Python `momentum > 0`
  float momentum = 0.0f;      // buf.mul_(momentum)
  float neg_lr = 0.0f;        // param.add_(buf, alpha=-lr) / param.addcdiv_(grad, avg, value=-lr)
};

// Fills RmspropScalars from torch.optim.RMSprop's options and the step's learning rate (1 - alpha and -lr in double
// first).
inline RmspropScalars ComputeRmspropScalars(double lr, double alpha, double eps, double weight_decay, double momentum,
                                            bool centered) {
  RmspropScalars s;
  s.has_weight_decay = weight_decay != 0.0;
  s.weight_decay = static_cast<float>(weight_decay);
  s.alpha = static_cast<float>(alpha);
  s.one_minus_alpha = static_cast<float>(1.0 - alpha);
  s.eps = static_cast<float>(eps);
  s.centered = centered;
  s.has_momentum = momentum > 0.0;
  s.momentum = static_cast<float>(momentum);
  s.neg_lr = static_cast<float>(-lr);
  return s;
}

// One element of RMSprop (PyTorch 2.x): L2 weight decay (one FMA), square_avg.mul_(alpha).addcmul_(g, g, value),
// centered: grad_avg.lerp_(g, 1 - alpha) and avg = sqrt(square_avg - grad_avg * grad_avg) (addcmul with value -1),
// else sqrt(square_avg); avg + eps; with momentum buf.mul_(momentum).addcdiv_(g, avg) then param.add_(buf,
// alpha=-lr) (one FMA), else param.addcdiv_(g, avg, value=-lr). The buffers start at zero (torch's state init).
ONNXAMP_HOST_DEVICE inline float RmspropElement(float p, float g, float* square_avg, float* grad_avg,
                                                float* momentum_buffer, const RmspropScalars& s) {
  if (s.has_weight_decay) g = AddScaled(g, p, s.weight_decay);
  const float v = SquareAverage(square_avg, g, s.alpha, s.one_minus_alpha);
  float avg;
  if (s.centered) {
    const float m = Lerp(*grad_avg, g, s.one_minus_alpha);
    *grad_avg = m;
    avg = sqrtf(v + -1.0f * m * m);
  } else {
    avg = sqrtf(v);
  }
  avg = avg + s.eps;
  if (s.has_momentum) {
    float buf = *momentum_buffer * s.momentum;
    buf = buf + 1.0f * g / avg;
    *momentum_buffer = buf;
    return AddScaled(p, buf, s.neg_lr);
  }
  return p + s.neg_lr * g / avg;
}

// ---- RAdam and NAdam -------------------------------------------------------------------------------------------

// What RAdam and NAdam do first to each element (torch 2.x): the weight decay (decoupled_weight_decay=True:
// param.mul_(1
// - lr * weight_decay); else L2: grad.add(param, alpha=weight_decay), one FMA), exp_avg.lerp_(grad, 1 - beta1) and
// exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2). Float32 as ATen takes them.
struct MomentScalars {
  bool has_weight_decay = false;  // L2 with weight_decay != 0
  float weight_decay = 0.0f;
  bool decoupled = false;     // decoupled with weight_decay != 0: instead of L2,
  float decay_factor = 1.0f;  // 1 - lr * weight_decay, computed in double
  float lerp_weight = 0.0f;   // 1 - beta1
  float beta2 = 0.0f;
  float one_minus_beta2 = 0.0f;
};

inline MomentScalars ComputeMomentScalars(double lr, double beta1, double beta2, double weight_decay, bool decoupled) {
  MomentScalars s;
  s.decoupled = decoupled && weight_decay != 0.0;
  s.decay_factor = static_cast<float>(1.0 - lr * weight_decay);
  s.has_weight_decay = !decoupled && weight_decay != 0.0;
  s.weight_decay = static_cast<float>(weight_decay);
  s.lerp_weight = static_cast<float>(1.0 - beta1);
  s.beta2 = static_cast<float>(beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  return s;
}

// Applies MomentScalars to one element: *p decayed (decoupled), *g with the L2 term, the moments updated in place and
// returned in *m and *v.
ONNXAMP_HOST_DEVICE inline void UpdateMoments(float* p, float* g, float* exp_avg, float* exp_avg_sq,
                                              const MomentScalars& s, float* m, float* v) {
  if (s.decoupled) *p = *p * s.decay_factor;
  if (s.has_weight_decay) *g = AddScaled(*g, *p, s.weight_decay);
  *m = Lerp(*exp_avg, *g, s.lerp_weight);
  *exp_avg = *m;
  *v = SquareAverage(exp_avg_sq, *g, s.beta2, s.one_minus_beta2);
}

// Scalars of one RAdam step for one parameter (torch.optim.radam._single_tensor_radam, capturable=False; L2 or, torch
// 2.1's decoupled_weight_decay=True, RAdamW), float32 as ATen takes them.
struct RadamScalars {
  MomentScalars moments;
  float bias_correction1 = 1.0f;       // exp_avg / bias_correction1
  float lr = 0.0f;                     // ... * lr
  bool rectified = false;              // rho_t > 5: the adaptive step, else SGD with momentum
  float bias_correction2_sqrt = 1.0f;  // (bias_correction2 ** 0.5) / (sqrt(v) + eps), a Python number over a tensor
  float rect = 1.0f;                   // the variance rectification term
  float eps = 0.0f;
};

// Fills RadamScalars for a parameter about to take its `step`-th step (1 for the first), in double as Python does
// (`step` through float32 as PyTorch keeps it): rho_inf = 2 / (1 - beta2) - 1, rho_t = rho_inf - 2 step beta2^step /
// (1 - beta2^step), rect = ((rho_t - 4) (rho_t - 2) rho_inf / ((rho_inf - 4) (rho_inf - 2) rho_t)) ** 0.5.
inline RadamScalars ComputeRadamScalars(double lr, double beta1, double beta2, double eps, double weight_decay,
                                        int64_t step, bool decoupled = false) {
  RadamScalars s;
  const double t = static_cast<double>(static_cast<float>(step));
  s.moments = ComputeMomentScalars(lr, beta1, beta2, weight_decay, decoupled);
  const double bias_correction1 = 1.0 - std::pow(beta1, t);
  const double bias_correction2 = 1.0 - std::pow(beta2, t);
  s.bias_correction1 = static_cast<float>(bias_correction1);
  s.lr = static_cast<float>(lr);
  const double rho_inf = 2.0 / (1.0 - beta2) - 1.0;
  const double rho_t = rho_inf - 2.0 * t * std::pow(beta2, t) / bias_correction2;
  s.rectified = rho_t > 5.0;
  if (s.rectified) {
    s.rect = static_cast<float>(
        std::pow((rho_t - 4.0) * (rho_t - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t), 0.5));
  }
  s.bias_correction2_sqrt = static_cast<float>(std::pow(bias_correction2, 0.5));
  s.eps = static_cast<float>(eps);
  return s;
}

// One element of RAdam; updates exp_avg and exp_avg_sq in place and returns the new parameter. In order:
// UpdateMoments, m / bias_correction1 * lr, then rectified: times reciprocal(sqrt(v) + eps) * bias_correction2_sqrt (a
// Python number divided by a tensor is the tensor's reciprocal times it) times rect; param.add_(update, alpha=-1) (an
// FMA with -1: p - update exactly).
ONNXAMP_HOST_DEVICE inline float RadamElement(float p, float g, float* exp_avg, float* exp_avg_sq,
                                              const RadamScalars& s) {
  float m, v;
  UpdateMoments(&p, &g, exp_avg, exp_avg_sq, s.moments, &m, &v);
  float update = m / s.bias_correction1 * s.lr;
  if (s.rectified) {
    const float adaptive = 1.0f / (sqrtf(v) + s.eps) * s.bias_correction2_sqrt;
    update = update * adaptive * s.rect;
  }
  return AddScaled(p, update, -1.0f);
}

// NAdam's momentum cache mu_t = beta1 (1 - 0.5 * 0.96^(t * momentum_decay)) (Dozat 2016), in double as Python
// computes it, for `t` the step as a Python float.
inline double NadamMu(double beta1, double momentum_decay, double t) {
  return beta1 * (1.0 - 0.5 * std::pow(0.96, t * momentum_decay));
}

// torch's state['mu_product'] after `step` steps: a float32 tensor multiplied in place by each step's mu (a Python
// float, rounded to float32 for the product). A product over every step so far: remembered per thread for the last
// (beta1, momentum_decay) and extended, so that steps asked in order cost one multiplication each.
inline float NadamMuProduct(double beta1, double momentum_decay, int64_t step) {
  struct Cache {
    double beta1 = -1.0, momentum_decay = -1.0;
    int64_t step = 0;
    float product = 1.0f;
  };
  thread_local Cache c;
  if (c.beta1 != beta1 || c.momentum_decay != momentum_decay || step < c.step)
    c = Cache{beta1, momentum_decay, 0, 1.0f};
  while (c.step < step) {
    ++c.step;
    c.product = c.product * static_cast<float>(NadamMu(beta1, momentum_decay, static_cast<float>(c.step)));
  }
  return c.product;
}

// Scalars of one NAdam step for one parameter (torch.optim.nadam._single_tensor_nadam of torch 2.x, capturable=False;
// L2 or, torch 2.1's decoupled_weight_decay=True, NAdamW), float32 as ATen takes them. torch 1.13's NAdam computed
// mu_product_next as mu_product * mu * mu_next, counting mu twice (fixed in torch 2.0); this is the fixed one, which is
// also the paper's.
struct NadamScalars {
  MomentScalars moments;
  float bias_correction2 = 1.0f;  // exp_avg_sq.div(bias_correction2).sqrt().add_(eps)
  float eps = 0.0f;
  float grad_coef = 0.0f;  // param.addcdiv_(grad, denom, value=-lr (1 - mu) / (1 - mu_product))
  float avg_coef = 0.0f;   // param.addcdiv_(exp_avg, denom, value=-lr mu_next / (1 - mu_product * mu_next))
};

// Fills NadamScalars for a parameter about to take its `step`-th step (1 for the first), in double as Python does,
// `step` through float32 as torch keeps state['step'] and mu_product as NadamMuProduct.
inline NadamScalars ComputeNadamScalars(double lr, double beta1, double beta2, double eps, double weight_decay,
                                        double momentum_decay, bool decoupled, int64_t step) {
  NadamScalars s;
  const double t = static_cast<double>(static_cast<float>(step));
  s.moments = ComputeMomentScalars(lr, beta1, beta2, weight_decay, decoupled);
  s.bias_correction2 = static_cast<float>(1.0 - std::pow(beta2, t));
  s.eps = static_cast<float>(eps);
  const double mu = NadamMu(beta1, momentum_decay, t);
  const double mu_next = NadamMu(beta1, momentum_decay, t + 1.0);
  const double mu_product = NadamMuProduct(beta1, momentum_decay, step);
  const double mu_product_next = mu_product * mu_next;
  s.grad_coef = static_cast<float>(-lr * (1.0 - mu) / (1.0 - mu_product));
  s.avg_coef = static_cast<float>((-lr * mu_next) / (1.0 - mu_product_next));
  return s;
}

// One element of NAdam; updates exp_avg and exp_avg_sq in place and returns the new parameter. In order:
// UpdateMoments, denom = sqrt(v / bias_correction2) + eps, then the two addcdiv_ (self + value * t1 / t2, left to
// right).
ONNXAMP_HOST_DEVICE inline float NadamElement(float p, float g, float* exp_avg, float* exp_avg_sq,
                                              const NadamScalars& s) {
  float m, v;
  UpdateMoments(&p, &g, exp_avg, exp_avg_sq, s.moments, &m, &v);
  const float denom = sqrtf(v / s.bias_correction2) + s.eps;
  p = p + s.grad_coef * g / denom;
  return p + s.avg_coef * m / denom;
}

// ---- Adagrad ---------------------------------------------------------------------------------------------------

// Scalars of one Adagrad step for one parameter (torch.optim.adagrad._single_tensor_adagrad), float32 as ATen takes
// them.
struct AdagradScalars {
  bool has_weight_decay = false;  // Python `weight_decay != 0`
  float weight_decay = 0.0f;      // alpha of grad.add(param, alpha=weight_decay)
  float initial = 0.0f;           // initial_accumulator_value: the sum before the first step
  float eps = 0.0f;               // std.add_(eps)
  float neg_clr = 0.0f;           // value of param.addcdiv_(grad, std, value=-clr)
};

// Fills AdagradScalars for a parameter about to take its `step`-th step (1 for the first): clr = lr / (1 + (step - 1)
// * lr_decay) in double, with `step` through float32 as PyTorch keeps state['step'].
inline AdagradScalars ComputeAdagradScalars(double lr, double lr_decay, double weight_decay, double initial, double eps,
                                            int64_t step) {
  AdagradScalars s;
  const double step_value = static_cast<double>(static_cast<float>(step));
  s.has_weight_decay = weight_decay != 0.0;
  s.weight_decay = static_cast<float>(weight_decay);
  s.initial = static_cast<float>(initial);
  s.eps = static_cast<float>(eps);
  s.neg_clr = static_cast<float>(-(lr / (1.0 + (step_value - 1.0) * lr_decay)));
  return s;
}

// One element of Adagrad; updates the sum in place (which holds `initial` before the first step: `first_step` reads
// that instead of the buffer) and returns the new parameter: L2 weight decay (one FMA), sum.addcmul_(g, g, value=1),
// std = sqrt(sum) + eps, param.addcdiv_(g, std, value=-clr).
ONNXAMP_HOST_DEVICE inline float AdagradElement(float p, float g, float* sum, bool first_step,
                                                const AdagradScalars& s) {
  if (s.has_weight_decay) g = AddScaled(g, p, s.weight_decay);
  const float v = (first_step ? s.initial : *sum) + 1.0f * g * g;
  *sum = v;
  const float std_dev = sqrtf(v) + s.eps;
  return p + s.neg_clr * g / std_dev;
}

// ---- Lion --------------------------------------------------------------------------------------------------------

// Scalars of one Lion step (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms"; the authors' PyTorch
// reference, lion_pytorch.py in google/automl), float32 as ATen passes them.
struct LionScalars {
  bool has_weight_decay = false;  // decoupled: p.mul_(1 - lr * weight_decay) first
  float decay_factor = 1.0f;      // (float)(1 - lr * weight_decay), computed in double
  float beta1 = 0.0f;             // update = exp_avg * beta1 + grad * (1 - beta1)
  float one_minus_beta1 = 0.0f;
  float beta2 = 0.0f;  // exp_avg.mul_(beta2).add_(grad, alpha=1 - beta2)
  float one_minus_beta2 = 0.0f;
  float neg_lr = 0.0f;  // p.add_(sign(update), alpha=-lr)
};

inline LionScalars ComputeLionScalars(double lr, double beta1, double beta2, double weight_decay) {
  LionScalars s;
  s.has_weight_decay = weight_decay != 0.0;
  s.decay_factor = static_cast<float>(1.0 - lr * weight_decay);
  s.beta1 = static_cast<float>(beta1);
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  s.beta2 = static_cast<float>(beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  s.neg_lr = static_cast<float>(-lr);
  return s;
}

// torch.sign as ATen computes it: (0 < x) - (x < 0), so 0 for +-0 and NaN.
ONNXAMP_HOST_DEVICE inline float Sign(float x) {
  return static_cast<float>(static_cast<int>(0.0f < x) - static_cast<int>(x < 0.0f));
}

// One element of Lion; updates exp_avg in place and returns the new parameter. In order: the decoupled decay
// p * decay_factor, the interpolation exp_avg * beta1 + grad * (1 - beta1) (two products and a sum, each rounded: the
// reference writes them as separate tensor ops), p + sign(update) * -lr (one FMA), exp_avg.mul_(beta2).add_(grad,
// alpha=1 - beta2) (one FMA). The buffer starts at zero.
ONNXAMP_HOST_DEVICE inline float LionElement(float p, float g, float* exp_avg, const LionScalars& s) {
  if (s.has_weight_decay) p = p * s.decay_factor;
  const float m = *exp_avg;
  const float update = m * s.beta1 + g * s.one_minus_beta1;
  p = AddScaled(p, Sign(update), s.neg_lr);
  *exp_avg = AddScaled(m * s.beta2, g, s.one_minus_beta2);
  return p;
}

// ---- Gradient clipping -----------------------------------------------------------------------------------------

// torch.nn.utils.clip_grad_norm_'s coefficient: `max_norm / (total_norm + 1e-6)` where the division of a Python
// number by a tensor is Tensor.__rtruediv__, i.e. reciprocal(total_norm + 1e-6) * max_norm in float32; then
// clamped to at most 1.
ONNXAMP_HOST_DEVICE inline float ClipCoefficient(float total_norm, float max_norm) {
  const float coef = (1.0f / (total_norm + 1e-6f)) * max_norm;
  return coef < 1.0f ? coef : 1.0f;
}

// torch.nn.utils.clip_grad_value_'s per-element clamp_(-clip_value, clip_value) (ATen's clamp: NaN stays NaN).
ONNXAMP_HOST_DEVICE inline float ClampElement(float g, float clip_value) {
  if (g != g) return g;
  return g < -clip_value ? -clip_value : (g > clip_value ? clip_value : g);
}

// ---- Exponential moving average of the weights ------------------------------------------------------------------

// The weight w of one EMA update `ema.lerp_(param, w)` that follows `updates` earlier ones: 1 - decay, or with
// warm-up 1 - min(decay, (1 + updates) / (10 + updates)) (the form of TensorFlow's ExponentialMovingAverage with
// num_updates; implementations that count the current update in `updates` start one update later). Computed in
// double and rounded once to float32, as lerp_ takes a Python float.
inline float EmaWeight(double decay, bool warmup, int64_t updates) {
  double d = decay;
  if (warmup) {
    const double n = static_cast<double>(updates);
    d = std::fmin(d, (1.0 + n) / (10.0 + n));
  }
  return static_cast<float>(1.0 - d);
}

// The weight of an update of stochastic weight averaging (torch.optim.swa_utils.AveragedModel's equal average, its
// default avg_fn) after `updates` steps taken, averaging from the step after `start` on: 0 before (the average is left
// as it is), then 1 / (k + 1) for the k-th update since (the first copies the weights).
inline float SwaWeight(int64_t start, int64_t updates) {
  if (updates < start) return 0.0f;
  return static_cast<float>(1.0 / static_cast<double>(updates - start + 1));
}

// The weight of the update of the weights' average after `updates` steps taken: SwaWeight with swa_start >= 0, else
// EmaWeight.
inline float AverageWeight(double ema_decay, bool ema_warmup, int64_t swa_start, int64_t updates) {
  return swa_start >= 0 ? SwaWeight(swa_start, updates) : EmaWeight(ema_decay, ema_warmup, updates);
}

}  // namespace onnxamp::trainer::optim_math
