// oneDNN plumbing for the linalg kernels (see onednn.h).
#include "runtime/ops/common/onednn.h"

#ifdef ONNXAMP_WITH_DNNL

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>

namespace onnxamp::ops::onednn {

const dnnl::engine& Engine() {
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& Stream() {
  thread_local dnnl::stream stream(Engine());
  return stream;
}

void SetNumThreads(int n) {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  // The OpenMP runtime oneDNN was linked with is already loaded; its entry point is found once.
  using SetFn = void (*)(int);
  // Set on every call (it only writes a per-thread variable): other code on this thread may change it too.
  static const SetFn set_num_threads = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (set_num_threads) set_num_threads(n < 1 ? 1 : n);
#else
  (void)n;  // TBB or sequential oneDNN: it manages its own threads
#endif
}

Status ParallelParts(exec::ThreadPool& threads, int64_t parts, const std::function<Status(int64_t)>& fn) {
  if (parts <= 1) {
    SetNumThreads(GetOneDnnThreading() == OneDnnThreading::kShared ? threads.num_threads() : 1);
    return parts == 1 ? fn(0) : Status::Ok();
  }
  std::mutex mu;
  Status first;
  threads.ParallelFor(parts, 1, [&](int64_t begin, int64_t end) {
    SetNumThreads(1);
    for (int64_t part = begin; part < end; ++part) {
      Status st = fn(part);
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first.ok()) first = std::move(st);
      }
    }
  });
  return first;
}

int64_t PartsFor(double flops, const exec::ThreadPool& threads) {
  if (GetOneDnnThreading() == OneDnnThreading::kShared) return 1;
  constexpr double kMinFlopsPerPart = 2e6;
  const double by_work = std::floor(flops / kMinFlopsPerPart);
  return std::max<int64_t>(1, std::min<int64_t>(threads.num_threads(), static_cast<int64_t>(std::min(by_work, 1e9))));
}

void* ThreadBuffer(int slot, size_t bytes) {
  // 64-byte aligned, like tensors: oneDNN's vector code prefers it.
  struct Aligned {
    std::unique_ptr<std::byte[]> data;
    size_t size = 0;
    std::byte* start = nullptr;
  };
  thread_local Aligned buffers[kBufferSlots];
  Aligned& b = buffers[slot];
  if (b.size < bytes) {
    b.data = std::make_unique<std::byte[]>(bytes + 64);
    b.size = bytes;
    const auto addr = reinterpret_cast<uintptr_t>(b.data.get());
    b.start = b.data.get() + ((64 - addr % 64) % 64);
  }
  return b.start;
}

bool Bf16Supported() {
  static const bool supported = [] {
    using dnnl::memory;
    try {
      const memory::desc a({8, 8}, memory::data_type::bf16, memory::format_tag::ab);
      const memory::desc c({8, 8}, memory::data_type::f32, memory::format_tag::ab);
      dnnl::matmul::primitive_desc mm(dnnl::matmul::desc(a, a, c), Engine());
      const memory::desc x({1, 16, 4, 4}, memory::data_type::bf16, memory::format_tag::any);
      const memory::desc w({16, 16, 3, 3}, memory::data_type::bf16, memory::format_tag::any);
      const memory::desc y({1, 16, 2, 2}, memory::data_type::f32, memory::format_tag::any);
      dnnl::convolution_forward::primitive_desc conv(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, x, w,
                                          y, {1, 1}, {0, 0}, {0, 0}),
          Engine());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return supported;
}

Status ErrorStatus(std::string_view what, const dnnl::error& e) {
  return Internal(what, ": oneDNN: ", e.what(), " (status ", static_cast<int>(e.status), ")");
}

dnnl::primitive_attr UserScratchpadAttr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

Status Execute(const dnnl::primitive& prim, const dnnl::primitive_desc_base& pd,
               std::unordered_map<int, dnnl::memory> args, std::string_view what) {
  try {
    const dnnl::memory::desc scratch_md = pd.scratchpad_desc();
    const size_t scratch_bytes = scratch_md.get_size();
    if (scratch_bytes > 0) args.emplace(DNNL_ARG_SCRATCHPAD, Wrap(scratch_md, ThreadBuffer(0, scratch_bytes)));
    dnnl::stream& stream = Stream();
    prim.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    return ErrorStatus(what, e);
  }
  return Status::Ok();
}

void Relayout::Make(const dnnl::memory::desc& user_md, const dnnl::memory::desc& prim_md, bool to_prim) {
  user = user_md;
  prim = prim_md;
  reorder = user_md != prim_md;
  if (!reorder) return;
  const dnnl::primitive_attr attr = UserScratchpadAttr();
  pd = to_prim ? dnnl::reorder::primitive_desc(Engine(), user_md, Engine(), prim_md, attr)
               : dnnl::reorder::primitive_desc(Engine(), prim_md, Engine(), user_md, attr);
  prim_reorder = dnnl::reorder(pd);
}

StatusOr<void*> Relayout::In(const void* data, int slot) const {
  if (!reorder) return const_cast<void*>(data);
  void* buf = ThreadBuffer(slot, prim.get_size());
  ONNXAMP_RETURN_IF_ERROR(
      Execute(prim_reorder, pd, {{DNNL_ARG_FROM, Wrap(user, data)}, {DNNL_ARG_TO, Wrap(prim, buf)}}, "reorder"));
  return buf;
}

Status Relayout::Out(const void* buf, void* data) const {
  if (!reorder) return Status::Ok();
  return Execute(prim_reorder, pd, {{DNNL_ARG_FROM, Wrap(prim, buf)}, {DNNL_ARG_TO, Wrap(user, data)}}, "reorder");
}

}  // namespace onnxamp::ops::onednn

#endif  // ONNXAMP_WITH_DNNL
