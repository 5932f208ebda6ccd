// Batch broadcasting for the linalg kernels (see gemm_util.h).
#include "runtime/ops/common/gemm_util.h"

#include <algorithm>

#include "runtime/ops/common/broadcast.h"

namespace onnxamp::ops {

StatusOr<BatchBroadcast> BroadcastBatch(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  BatchBroadcast r;
  const size_t rank = std::max(a.size(), b.size());
  // Right-aligned dims, padded with 1 on the left.
  std::vector<int64_t> da(rank, 1), db(rank, 1);
  std::copy(a.begin(), a.end(), da.begin() + (rank - a.size()));
  std::copy(b.begin(), b.end(), db.begin() + (rank - b.size()));
  r.dims.resize(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (da[i] != db[i] && da[i] != 1 && db[i] != 1) {
      return InvalidArgument("batch dimensions ", ShapeToString(a), " and ", ShapeToString(b), " cannot be broadcast (",
                             da[i], " vs ", db[i], ")");
    }
    r.dims[i] = da[i] == 1 ? db[i] : da[i];
    r.count *= r.dims[i];
  }
  r.offsets_a.resize(static_cast<size_t>(r.count));
  r.offsets_b.resize(static_cast<size_t>(r.count));
  std::vector<int64_t> index(rank, 0);
  for (int64_t flat = 0; flat < r.count; ++flat) {
    int64_t oa = 0, ob = 0;
    for (size_t i = 0; i < rank; ++i) {
      oa = oa * da[i] + (da[i] == 1 ? 0 : index[i]);
      ob = ob * db[i] + (db[i] == 1 ? 0 : index[i]);
    }
    r.offsets_a[flat] = oa;
    r.offsets_b[flat] = ob;
    if (oa != flat) r.a_full = false;
    if (ob != flat) r.b_full = false;
    if (oa != 0) r.a_single = false;
    if (ob != 0) r.b_single = false;
    for (size_t i = rank; i-- > 0;) {
      if (++index[i] < r.dims[i]) break;
      index[i] = 0;
    }
  }
  return r;
}

}  // namespace onnxamp::ops
