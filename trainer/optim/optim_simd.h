// AVX2 versions of the optimizers' per-element loops (optim_math.h), chosen at run time. They compute the same
// operations in the same order as the scalar functions (FMA exactly where those call fmaf, every other operation
// rounded on its own), so a step gives the same bits with or without them; tests compare the two bit for bit.
#pragma once

#include <cstddef>

#include "trainer/optim/optim_math.h"

namespace onnxamp::trainer::optim_simd {

// Whether the CPU runs the AVX2 loops (AVX2 and FMA), and not disabled by SetEnabled(false) (tests).
bool Enabled();
void SetEnabled(bool enabled);

// AdamElement over elements [0, n) of the arrays (max_exp_avg_sq: only read and written when s.amsgrad). Returns how
// many leading elements it updated (a multiple of 8, 0 when !Enabled()); the caller runs the scalar function on the
// rest.
size_t AdamSteps(float* p, const float* g, float* exp_avg, float* exp_avg_sq, float* max_exp_avg_sq, size_t n,
                 const optim_math::AdamScalars& s);

// SgdElement over [0, n) (momentum_buffer: only used when s.has_momentum), with the same return contract.
size_t SgdSteps(float* p, const float* g, float* momentum_buffer, size_t n, bool first_step,
                const optim_math::SgdScalars& s);

// RmspropElement over [0, n) (grad_avg: only used when s.centered; momentum_buffer: when s.has_momentum), with the
// same return contract.
size_t RmspropSteps(float* p, const float* g, float* square_avg, float* grad_avg, float* momentum_buffer, size_t n,
                    const optim_math::RmspropScalars& s);

// RadamElement over [0, n), with the same return contract.
size_t RadamSteps(float* p, const float* g, float* exp_avg, float* exp_avg_sq, size_t n,
                  const optim_math::RadamScalars& s);

// NadamElement over [0, n), with the same return contract.
size_t NadamSteps(float* p, const float* g, float* exp_avg, float* exp_avg_sq, size_t n,
                  const optim_math::NadamScalars& s);

// AdagradElement over [0, n), with the same return contract.
size_t AdagradSteps(float* p, const float* g, float* sum, size_t n, bool first_step,
                    const optim_math::AdagradScalars& s);

// LionElement over [0, n), with the same return contract.
size_t LionSteps(float* p, const float* g, float* exp_avg, size_t n, const optim_math::LionScalars& s);

// start[j] = optim_math::Lerp(start[j], end[j], weight) over [0, n) (the moving average of the weights), with the
// same return contract.
size_t LerpSteps(float* start, const float* end, size_t n, float weight);

}  // namespace onnxamp::trainer::optim_simd
