// AVX2 optimizer loops (optim_simd.h). Built with -ffp-contract=off (trainer/CMakeLists.txt): GCC implements the
// arithmetic intrinsics as vector expressions, which it would otherwise fuse into FMAs where optim_math.h rounds.
#include "trainer/optim/optim_simd.h"

#include <atomic>

#include "runtime/common/cpu_features.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define ONNXAMP_OPTIM_AVX2 1
#define ONNXAMP_OPTIM_AVX2_TARGET __attribute__((target("avx2,fma")))
#endif

namespace onnxamp::trainer::optim_simd {
namespace {

std::atomic<bool> g_enabled{true};

#ifdef ONNXAMP_OPTIM_AVX2
// optim_math::Lerp(start, end, weight) for a weight shared by all lanes.
ONNXAMP_OPTIM_AVX2_TARGET inline __m256 Lerp8(__m256 start, __m256 end, float weight) {
  const __m256 diff = _mm256_sub_ps(end, start);
  if (__builtin_fabsf(weight) < 0.5f) return _mm256_fmadd_ps(_mm256_set1_ps(weight), diff, start);
  return _mm256_fmadd_ps(_mm256_set1_ps(weight - 1.0f), diff, end);
}

// optim_math::SquareAverage of 8 lanes: avg * decay + (one_minus_decay * g) * g, each operation rounded.
ONNXAMP_OPTIM_AVX2_TARGET inline __m256 SquareAverage8(__m256 avg, __m256 g, __m256 decay, __m256 one_minus_decay) {
  return _mm256_add_ps(_mm256_mul_ps(avg, decay), _mm256_mul_ps(_mm256_mul_ps(one_minus_decay, g), g));
}

ONNXAMP_OPTIM_AVX2_TARGET size_t AdamStepsAvx2(float* p, const float* g, float* exp_avg, float* exp_avg_sq,
                                               float* max_exp_avg_sq, size_t n, const optim_math::AdamScalars& s) {
  const __m256 decay_factor = _mm256_set1_ps(s.decay_factor);
  const __m256 weight_decay = _mm256_set1_ps(s.weight_decay);
  const __m256 beta2 = _mm256_set1_ps(s.beta2);
  const __m256 one_minus_beta2 = _mm256_set1_ps(s.one_minus_beta2);
  const __m256 bias_correction2_sqrt = _mm256_set1_ps(s.bias_correction2_sqrt);
  const __m256 eps = _mm256_set1_ps(s.eps);
  const __m256 neg_step_size = _mm256_set1_ps(s.neg_step_size);
  const size_t full = n / 8 * 8;
  for (size_t j = 0; j < full; j += 8) {
    __m256 pv = _mm256_loadu_ps(p + j);
    __m256 gv = _mm256_loadu_ps(g + j);
    if (s.has_weight_decay) {
      if (s.decoupled) {
        pv = _mm256_mul_ps(pv, decay_factor);
      } else {
        gv = _mm256_fmadd_ps(pv, weight_decay, gv);  // AddScaled(g, p, wd) = fmaf(p, wd, g)
      }
    }
    const __m256 m = Lerp8(_mm256_loadu_ps(exp_avg + j), gv, s.lerp_weight);
    _mm256_storeu_ps(exp_avg + j, m);
    __m256 v = SquareAverage8(_mm256_loadu_ps(exp_avg_sq + j), gv, beta2, one_minus_beta2);
    _mm256_storeu_ps(exp_avg_sq + j, v);
    if (s.amsgrad) {
      const __m256 old = _mm256_loadu_ps(max_exp_avg_sq + j);
      // MaximumPropagateNan(old, v): old when old is NaN or old > v, else v.
      const __m256 take_old = _mm256_or_ps(_mm256_cmp_ps(old, old, _CMP_UNORD_Q), _mm256_cmp_ps(old, v, _CMP_GT_OQ));
      v = _mm256_blendv_ps(v, old, take_old);
      _mm256_storeu_ps(max_exp_avg_sq + j, v);
    }
    const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(v), bias_correction2_sqrt), eps);
    pv = _mm256_add_ps(pv, _mm256_div_ps(_mm256_mul_ps(neg_step_size, m), denom));
    _mm256_storeu_ps(p + j, pv);
  }
  return full;
}

ONNXAMP_OPTIM_AVX2_TARGET size_t SgdStepsAvx2(float* p, const float* g, float* momentum_buffer, size_t n,
                                              bool first_step, const optim_math::SgdScalars& s) {
  const __m256 weight_decay = _mm256_set1_ps(s.weight_decay);
  const __m256 momentum = _mm256_set1_ps(s.momentum);
  const __m256 one_minus_dampening = _mm256_set1_ps(s.one_minus_dampening);
  const __m256 neg_lr = _mm256_set1_ps(s.neg_lr);
  const size_t full = n / 8 * 8;
  for (size_t j = 0; j < full; j += 8) {
    const __m256 pv = _mm256_loadu_ps(p + j);
    __m256 gv = _mm256_loadu_ps(g + j);
    if (s.has_weight_decay) gv = _mm256_fmadd_ps(pv, weight_decay, gv);
    if (s.has_momentum) {
      const __m256 buf = first_step ? gv
                                    : _mm256_fmadd_ps(gv, one_minus_dampening,
                                                      _mm256_mul_ps(_mm256_loadu_ps(momentum_buffer + j), momentum));
      _mm256_storeu_ps(momentum_buffer + j, buf);
      gv = s.nesterov ? _mm256_fmadd_ps(buf, momentum, gv) : buf;
    }
    _mm256_storeu_ps(p + j, _mm256_fmadd_ps(gv, neg_lr, pv));
  }
  return full;
}

ONNXAMP_OPTIM_AVX2_TARGET size_t RmspropStepsAvx2(float* p, const float* g, float* square_avg, float* grad_avg,
                                                  float* momentum_buffer, size_t n,
                                                  const optim_math::RmspropScalars& s) {
  const __m256 weight_decay = _mm256_set1_ps(s.weight_decay);
  const __m256 alpha = _mm256_set1_ps(s.alpha);
  const __m256 one_minus_alpha = _mm256_set1_ps(s.one_minus_alpha);
  const __m256 minus_one = _mm256_set1_ps(-1.0f);
  const __m256 eps = _mm256_set1_ps(s.eps);
  const __m256 momentum = _mm256_set1_ps(s.momentum);
  const __m256 neg_lr = _mm256_set1_ps(s.neg_lr);
  const size_t full = n / 8 * 8;
  for (size_t j = 0; j < full; j += 8) {
    const __m256 pv = _mm256_loadu_ps(p + j);
    __m256 gv = _mm256_loadu_ps(g + j);
    if (s.has_weight_decay) gv = _mm256_fmadd_ps(pv, weight_decay, gv);
    const __m256 v = SquareAverage8(_mm256_loadu_ps(square_avg + j), gv, alpha, one_minus_alpha);
    _mm256_storeu_ps(square_avg + j, v);
    __m256 avg;
    if (s.centered) {
      const __m256 m = Lerp8(_mm256_loadu_ps(grad_avg + j), gv, s.one_minus_alpha);
      _mm256_storeu_ps(grad_avg + j, m);
      avg = _mm256_sqrt_ps(_mm256_add_ps(v, _mm256_mul_ps(_mm256_mul_ps(minus_one, m), m)));
    } else {
      avg = _mm256_sqrt_ps(v);
    }
    avg = _mm256_add_ps(avg, eps);
    if (s.has_momentum) {
      __m256 buf = _mm256_mul_ps(_mm256_loadu_ps(momentum_buffer + j), momentum);
      buf = _mm256_add_ps(buf, _mm256_div_ps(gv, avg));  // 1 * g is g
      _mm256_storeu_ps(momentum_buffer + j, buf);
      _mm256_storeu_ps(p + j, _mm256_fmadd_ps(buf, neg_lr, pv));
    } else {
      _mm256_storeu_ps(p + j, _mm256_add_ps(pv, _mm256_div_ps(_mm256_mul_ps(neg_lr, gv), avg)));
    }
  }
  return full;
}

// optim_math::UpdateMoments of 8 lanes: the constants once, then Apply per vector.
struct Moments8 {
  ONNXAMP_OPTIM_AVX2_TARGET explicit Moments8(const optim_math::MomentScalars& s)
      : s(s),
        decay_factor(_mm256_set1_ps(s.decay_factor)),
        weight_decay(_mm256_set1_ps(s.weight_decay)),
        beta2(_mm256_set1_ps(s.beta2)),
        one_minus_beta2(_mm256_set1_ps(s.one_minus_beta2)) {}
  // Decays *pv, adds the L2 term to *gv, updates the moments at exp_avg and exp_avg_sq (8 each), returns them.
  ONNXAMP_OPTIM_AVX2_TARGET void Apply(__m256* pv, __m256* gv, float* exp_avg, float* exp_avg_sq, __m256* m,
                                       __m256* v) const {
    if (s.decoupled) *pv = _mm256_mul_ps(*pv, decay_factor);
    if (s.has_weight_decay) *gv = _mm256_fmadd_ps(*pv, weight_decay, *gv);
    *m = Lerp8(_mm256_loadu_ps(exp_avg), *gv, s.lerp_weight);
    _mm256_storeu_ps(exp_avg, *m);
    *v = SquareAverage8(_mm256_loadu_ps(exp_avg_sq), *gv, beta2, one_minus_beta2);
    _mm256_storeu_ps(exp_avg_sq, *v);
  }
  const optim_math::MomentScalars& s;
  __m256 decay_factor, weight_decay, beta2, one_minus_beta2;
};

ONNXAMP_OPTIM_AVX2_TARGET size_t RadamStepsAvx2(float* p, const float* g, float* exp_avg, float* exp_avg_sq, size_t n,
                                                const optim_math::RadamScalars& s) {
  const Moments8 moments(s.moments);
  const __m256 bias_correction1 = _mm256_set1_ps(s.bias_correction1);
  const __m256 lr = _mm256_set1_ps(s.lr);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 eps = _mm256_set1_ps(s.eps);
  const __m256 bias_correction2_sqrt = _mm256_set1_ps(s.bias_correction2_sqrt);
  const __m256 rect = _mm256_set1_ps(s.rect);
  const __m256 minus_one = _mm256_set1_ps(-1.0f);
  const size_t full = n / 8 * 8;
  for (size_t j = 0; j < full; j += 8) {
    __m256 pv = _mm256_loadu_ps(p + j);
    __m256 gv = _mm256_loadu_ps(g + j);
    __m256 m, v;
    moments.Apply(&pv, &gv, exp_avg + j, exp_avg_sq + j, &m, &v);
    __m256 update = _mm256_mul_ps(_mm256_div_ps(m, bias_correction1), lr);
    if (s.rectified) {
      const __m256 adaptive =
          _mm256_mul_ps(_mm256_div_ps(one, _mm256_add_ps(_mm256_sqrt_ps(v), eps)), bias_correction2_sqrt);
      update = _mm256_mul_ps(_mm256_mul_ps(update, adaptive), rect);
    }
    _mm256_storeu_ps(p + j, _mm256_fmadd_ps(update, minus_one, pv));  // AddScaled(p, update, -1)
  }
  return full;
}

ONNXAMP_OPTIM_AVX2_TARGET size_t NadamStepsAvx2(float* p, const float* g, float* exp_avg, float* exp_avg_sq, size_t n,
                                                const optim_math::NadamScalars& s) {
  const Moments8 moments(s.moments);
  const __m256 bias_correction2 = _mm256_set1_ps(s.bias_correction2);
  const __m256 eps = _mm256_set1_ps(s.eps);
  const __m256 grad_coef = _mm256_set1_ps(s.grad_coef);
  const __m256 avg_coef = _mm256_set1_ps(s.avg_coef);
  const size_t full = n / 8 * 8;
  for (size_t j = 0; j < full; j += 8) {
    __m256 pv = _mm256_loadu_ps(p + j);
    __m256 gv = _mm256_loadu_ps(g + j);
    __m256 m, v;
    moments.Apply(&pv, &gv, exp_avg + j, exp_avg_sq + j, &m, &v);
    const __m256 denom = _mm256_add_ps(_mm256_sqrt_ps(_mm256_div_ps(v, bias_correction2)), eps);
    pv = _mm256_add_ps(pv, _mm256_div_ps(_mm256_mul_ps(grad_coef, gv), denom));
    pv = _mm256_add_ps(pv, _mm256_div_ps(_mm256_mul_ps(avg_coef, m), denom));
    _mm256_storeu_ps(p + j, pv);
  }
  return full;
}

ONNXAMP_OPTIM_AVX2_TARGET size_t AdagradStepsAvx2(float* p, const float* g, float* sum, size_t n, bool first_step,
                                                  const optim_math::AdagradScalars& s) {
  const __m256 weight_decay = _mm256_set1_ps(s.weight_decay);
  const __m256 initial = _mm256_set1_ps(s.initial);
  const __m256 eps = _mm256_set1_ps(s.eps);
  const __m256 neg_clr = _mm256_set1_ps(s.neg_clr);
  const size_t full = n / 8 * 8;
  for (size_t j = 0; j < full; j += 8) {
    const __m256 pv = _mm256_loadu_ps(p + j);
    __m256 gv = _mm256_loadu_ps(g + j);
    if (s.has_weight_decay) gv = _mm256_fmadd_ps(pv, weight_decay, gv);
    const __m256 v = _mm256_add_ps(first_step ? initial : _mm256_loadu_ps(sum + j), _mm256_mul_ps(gv, gv));
    _mm256_storeu_ps(sum + j, v);
    const __m256 std_dev = _mm256_add_ps(_mm256_sqrt_ps(v), eps);
    _mm256_storeu_ps(p + j, _mm256_add_ps(pv, _mm256_div_ps(_mm256_mul_ps(neg_clr, gv), std_dev)));
  }
  return full;
}

ONNXAMP_OPTIM_AVX2_TARGET size_t LionStepsAvx2(float* p, const float* g, float* exp_avg, size_t n,
                                               const optim_math::LionScalars& s) {
  const __m256 decay_factor = _mm256_set1_ps(s.decay_factor);
  const __m256 beta1 = _mm256_set1_ps(s.beta1);
  const __m256 one_minus_beta1 = _mm256_set1_ps(s.one_minus_beta1);
  const __m256 beta2 = _mm256_set1_ps(s.beta2);
  const __m256 one_minus_beta2 = _mm256_set1_ps(s.one_minus_beta2);
  const __m256 neg_lr = _mm256_set1_ps(s.neg_lr);
  const __m256 zero = _mm256_setzero_ps();
  const __m256 one = _mm256_set1_ps(1.0f);
  const size_t full = n / 8 * 8;
  for (size_t j = 0; j < full; j += 8) {
    __m256 pv = _mm256_loadu_ps(p + j);
    const __m256 gv = _mm256_loadu_ps(g + j);
    const __m256 m = _mm256_loadu_ps(exp_avg + j);
    if (s.has_weight_decay) pv = _mm256_mul_ps(pv, decay_factor);
    const __m256 update = _mm256_add_ps(_mm256_mul_ps(m, beta1), _mm256_mul_ps(gv, one_minus_beta1));
    // Sign: (0 < u) - (u < 0) as 1, -1 or 0 (ordered compares: NaN gives 0).
    const __m256 sign = _mm256_sub_ps(_mm256_and_ps(_mm256_cmp_ps(zero, update, _CMP_LT_OQ), one),
                                      _mm256_and_ps(_mm256_cmp_ps(update, zero, _CMP_LT_OQ), one));
    _mm256_storeu_ps(p + j, _mm256_fmadd_ps(sign, neg_lr, pv));
    _mm256_storeu_ps(exp_avg + j, _mm256_fmadd_ps(gv, one_minus_beta2, _mm256_mul_ps(m, beta2)));
  }
  return full;
}

ONNXAMP_OPTIM_AVX2_TARGET size_t LerpStepsAvx2(float* start, const float* end, size_t n, float weight) {
  const size_t full = n / 8 * 8;
  for (size_t j = 0; j < full; j += 8) {
    _mm256_storeu_ps(start + j, Lerp8(_mm256_loadu_ps(start + j), _mm256_loadu_ps(end + j), weight));
  }
  return full;
}
#endif

}  // namespace

// The body of each public loop: the AVX2 loop when Enabled(), else none of the elements (the caller's scalar loop).
#ifdef ONNXAMP_OPTIM_AVX2
#define ONNXAMP_OPTIM_DISPATCH(call) return Enabled() ? (call) : 0
#else
#define ONNXAMP_OPTIM_DISPATCH(call) return 0
#endif

bool Enabled() {
#ifdef ONNXAMP_OPTIM_AVX2
  return g_enabled.load(std::memory_order_relaxed) && CpuHasAvx2Fma();
#else
  return false;
#endif
}

void SetEnabled(bool enabled) { g_enabled.store(enabled); }

size_t AdamSteps(float* p, const float* g, float* exp_avg, float* exp_avg_sq, float* max_exp_avg_sq, size_t n,
                 const optim_math::AdamScalars& s) {
  ONNXAMP_OPTIM_DISPATCH(AdamStepsAvx2(p, g, exp_avg, exp_avg_sq, max_exp_avg_sq, n, s));
}

size_t SgdSteps(float* p, const float* g, float* momentum_buffer, size_t n, bool first_step,
                const optim_math::SgdScalars& s) {
  ONNXAMP_OPTIM_DISPATCH(SgdStepsAvx2(p, g, momentum_buffer, n, first_step, s));
}

size_t RmspropSteps(float* p, const float* g, float* square_avg, float* grad_avg, float* momentum_buffer, size_t n,
                    const optim_math::RmspropScalars& s) {
  ONNXAMP_OPTIM_DISPATCH(RmspropStepsAvx2(p, g, square_avg, grad_avg, momentum_buffer, n, s));
}

size_t RadamSteps(float* p, const float* g, float* exp_avg, float* exp_avg_sq, size_t n,
                  const optim_math::RadamScalars& s) {
  ONNXAMP_OPTIM_DISPATCH(RadamStepsAvx2(p, g, exp_avg, exp_avg_sq, n, s));
}

size_t NadamSteps(float* p, const float* g, float* exp_avg, float* exp_avg_sq, size_t n,
                  const optim_math::NadamScalars& s) {
  ONNXAMP_OPTIM_DISPATCH(NadamStepsAvx2(p, g, exp_avg, exp_avg_sq, n, s));
}

size_t AdagradSteps(float* p, const float* g, float* sum, size_t n, bool first_step,
                    const optim_math::AdagradScalars& s) {
  ONNXAMP_OPTIM_DISPATCH(AdagradStepsAvx2(p, g, sum, n, first_step, s));
}

size_t LionSteps(float* p, const float* g, float* exp_avg, size_t n, const optim_math::LionScalars& s) {
  ONNXAMP_OPTIM_DISPATCH(LionStepsAvx2(p, g, exp_avg, n, s));
}

size_t LerpSteps(float* start, const float* end, size_t n, float weight) {
  ONNXAMP_OPTIM_DISPATCH(LerpStepsAvx2(start, end, n, weight));
}

}  // namespace onnxamp::trainer::optim_simd
