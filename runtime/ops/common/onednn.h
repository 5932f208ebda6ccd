// oneDNN plumbing for the linalg kernels: the CPU engine, per-thread streams and scratchpads, the thread count
// oneDNN uses, dnnl::error -> Status, and a thread-safe cache of primitives per problem shape.
//
// Only for sources compiled into onnxamp_runtime with ONNXAMP_WITH_DNNL (the library links oneDNN privately).
//
// Threading: this oneDNN is built on OpenMP, whose idle workers spin for a while after every parallel region.
// OpenMP's team size is a per-thread setting, set before every call (SetNumThreads). With OneDnnThreading::kShared
// a primitive runs on the session's num_threads OpenMP threads, beside the pool's own. With kSplit (the default:
// the pool's workers would lose the cores to spinning OpenMP threads) oneDNN runs single-threaded and the kernels
// split a problem into parts that run on the pool (PartsFor, ParallelParts). Either way the thread count
// is SessionOptions::num_threads. The OpenMP runtime is the one oneDNN loaded; its omp_set_num_threads is looked
// up at run time, so this file needs no OpenMP flags.
#pragma once

#ifdef ONNXAMP_WITH_DNNL

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/thread_pool.h"
#include "runtime/ops/common/gemm.h"

namespace onnxamp::ops {
struct ConvProblem;  // conv_onednn.h
}  // namespace onnxamp::ops

namespace onnxamp::ops::onednn {

// The CPU engine (created once).
const dnnl::engine& Engine();

// The calling thread's stream on Engine().
dnnl::stream& Stream();

// Makes primitives created or executed on the calling thread use `n` threads (n >= 1).
void SetNumThreads(int n);

// Runs fn(part) for every part in [0, parts): with one part, on the calling thread with oneDNN using the
// session's threads (kShared) or one thread (kSplit); with more, spread over `threads`, each part with oneDNN
// single-threaded. Returns the first error.
Status ParallelParts(exec::ThreadPool& threads, int64_t parts, const std::function<Status(int64_t)>& fn);

// How many parts a problem of `flops` is worth splitting into on `threads`: 1 under kShared; under kSplit one per
// thread, but none smaller than about 2 MFLOP (waking a thread costs more than that saves).
int64_t PartsFor(double flops, const exec::ThreadPool& threads);

// True when this CPU runs oneDNN's bfloat16 matmul and convolution (checked once).
bool Bf16Supported();

// Buffers owned by the calling thread, valid until the next call for the same slot on this thread: slot 0 holds
// primitive scratchpads (Execute uses it), slots 1..3 reordered tensors, slot 4 a GEMM's dense destination.
constexpr int kBufferSlots = 5;
void* ThreadBuffer(int slot, size_t bytes);

// The message of a dnnl::error as "<what>: <oneDNN's message> (status <n>)".
Status ErrorStatus(std::string_view what, const dnnl::error& e);

// An attribute with a user-managed scratchpad (so that one primitive can run on several threads at once).
dnnl::primitive_attr UserScratchpadAttr();

// Executes `prim` with `args` plus its scratchpad on the calling thread's stream and waits for it.
Status Execute(const dnnl::primitive& prim, const dnnl::primitive_desc_base& pd,
               std::unordered_map<int, dnnl::memory> args, std::string_view what);

// A memory object over caller-owned data.
inline dnnl::memory Wrap(const dnnl::memory::desc& md, const void* data) {
  return dnnl::memory(md, Engine(), const_cast<void*>(data));
}

// Convolution tensors in oneDNN's terms (conv_onednn.cc): the plain [N, C, spatial...] tag of a tensor of `ndims`
// dims, the weights' [(G,) O, I, kernel...] tag, and a problem's x, w and y dims in those layouts.
dnnl::memory::format_tag PlainTag(size_t ndims);
dnnl::memory::format_tag WeightsTag(size_t ndims, bool grouped);
struct ConvDims {
  dnnl::memory::dims x, w, y;
};
ConvDims ConvDimsOf(const ConvProblem& p);

// A tensor in the caller's layout and in the one a primitive wants, with the reorder between them when they differ:
// user -> primitive for an input (`to_prim`), primitive -> user for an output.
struct Relayout {
  dnnl::memory::desc user;
  dnnl::memory::desc prim;
  bool reorder = false;
  dnnl::reorder::primitive_desc pd;
  dnnl::reorder prim_reorder;

  void Make(const dnnl::memory::desc& user_md, const dnnl::memory::desc& prim_md, bool to_prim);

  // The primitive's view of the caller's input `data`: reordered into ThreadBuffer(`slot`) when the layouts differ.
  StatusOr<void*> In(const void* data, int slot) const;
  // Where the primitive writes an output that goes to the caller's `data`.
  void* OutBuffer(void* data, int slot) const { return reorder ? ThreadBuffer(slot, prim.get_size()) : data; }
  // Moves the primitive's output from `buf` (OutBuffer) into the caller's `data`.
  Status Out(const void* buf, void* data) const;
};

// Primitives (or anything built once per problem shape) keyed by a vector of integers. Thread-safe. Holds at most
// kMaxEntries values; past that it starts afresh (shapes that keep changing must not grow memory forever).
template <typename V>
class Cache {
 public:
  static constexpr size_t kMaxEntries = 64;

  // The value for `key`, made by `make()` (returning StatusOr<V>) the first time. A failed make is not cached.
  template <typename Make>
  StatusOr<std::shared_ptr<const V>> Get(const std::vector<int64_t>& key, Make&& make) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = map_.find(key);
      if (it != map_.end()) return it->second;
    }
    // Made outside the lock: creating a primitive can take a while, and two threads making the same one is
    // harmless.
    StatusOr<V> made = make();
    if (!made.ok()) return made.status();
    auto value = std::make_shared<const V>(std::move(made).value());
    std::lock_guard<std::mutex> lock(mu_);
    if (map_.size() >= kMaxEntries) map_.clear();
    return map_.emplace(key, std::move(value)).first->second;
  }

 private:
  std::mutex mu_;
  std::map<std::vector<int64_t>, std::shared_ptr<const V>> map_;
};

}  // namespace onnxamp::ops::onednn

#endif  // ONNXAMP_WITH_DNNL
