// Training on CUDA (trainer/device_training.h): the train and eval graphs in CUDA sessions, the optimizer step on
// the device (fused_optimizer.h), the training data uploaded once when it fits and batched on the device, and the
// BatchNormalization statistics committed on the device only for taken steps. No host synchronisation inside a step.
#pragma once

namespace onnxamp::trainer::cuda {

// Registers CUDA training with the trainer (TrainerOptions::device = kCuda) when a CUDA device is usable; returns
// whether it did. Safe to call more than once.
bool RegisterCudaTraining();

}  // namespace onnxamp::trainer::cuda
