// Training on CUDA (trainer/device_training.h): the train and eval graphs in CUDA sessions, the optimizer step on
// the device (fused_optimizer.h), the training data uploaded once when it fits and batched on the device, and the
// BatchNormalization statistics committed on the device only for taken steps. No host synchronisation inside a step.
#pragma once

namespace onnxamp::trainer::cuda {

// Registers CUDA training with the trainer (TrainerOptions::device = kCuda) when a CUDA device is usable; returns
// whether it did. Safe to call more than once.
bool RegisterCudaTraining();

// Tests: while set, every CUDA Graph capture of a training step fails (it makes a call that stream capture forbids),
// so that the fallback to eager steps can be checked.
void FailCudaGraphCapturesForTesting(bool fail);

}  // namespace onnxamp::trainer::cuda
