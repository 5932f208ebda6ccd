// Dataset loading (.npz/.npy/.pb, .npy and stored .npz entries memory-mapped; CSV through csv.h) and checks (sample
// counts, model input types, finite features, labels), splits into views and batches.
#include "trainer/data/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <span>
#include <system_error>
#include <utility>

#include "importer/tensor_file.h"
#include "importer/tensor_map.h"
#include "runtime/common/half.h"
#include "runtime/common/random.h"
#include "runtime/ops/common/broadcast.h"
#include "trainer/data/sampler.h"

namespace onnxamp::trainer {
namespace {

// "[3,4]": the dims of one sample (all but the first).
std::string SampleShape(const ir::Tensor& t) {
  return t.dims().empty() ? "[]" : ops::ShapeToString(std::span<const int64_t>(t.dims()).subspan(1));
}

// "a, b, c".
template <typename Range, typename Name>
std::string JoinNames(const Range& items, Name name) {
  std::string s;
  for (const auto& item : items) {
    if (!s.empty()) s += ", ";
    s += name(item);
  }
  return s;
}

// Elements per sample of `t`, which has `n` > 0 samples.
int64_t RowElements(const ir::Tensor& t, int64_t n) { return t.num_elements() / n; }

// The first non-finite element of a floating-point tensor: its index and "nan", "inf" or "-inf".
struct NonFinite {
  int64_t index = 0;
  std::string what;
};

// Scans run over this many bytes at a time; after each chunk of a memory-mapped array its pages leave the resident
// set, so checking a file larger than memory reads it once without keeping it.
constexpr size_t kScanChunkBytes = size_t{8} << 20;

// What one read of a mapped row brings into the resident set at least: the kernel maps the pages around a faulting
// one that the page cache holds (fault_around_bytes, 64 KiB by default).
constexpr uint64_t kFaultAroundBytes = uint64_t{64} << 10;

// Which rows of an array a scan reports: all (an empty mask), or those whose mask byte is set (a view's rows).
struct RowFilter {
  std::vector<char> mask;
  int64_t row_elements = 1;
  bool Reports(size_t element) const { return mask.empty() || mask[element / static_cast<size_t>(row_elements)] != 0; }
};

// Calls scan(chunk, first) over consecutive element ranges of `t` (elements of sizeof(T) bytes; `first` is the index of
// chunk[0]) until it returns a value. Bytes not aligned for T (a mapped .npz entry) are copied into an aligned staging
// buffer first, a chunk at a time.
template <typename T, typename Result, typename Scan>
std::optional<Result> ScanChunks(const ir::Tensor& t, Scan scan) {
  const size_t n = t.nbytes() / sizeof(T);
  constexpr size_t kChunk = kScanChunkBytes / sizeof(T);
  const bool aligned = reinterpret_cast<uintptr_t>(t.data()) % alignof(T) == 0;
  std::vector<T> staging(aligned ? 0 : std::min(n, kChunk));
  for (size_t begin = 0; begin < n; begin += kChunk) {
    const size_t count = std::min(n - begin, kChunk);
    const std::byte* bytes = t.data() + begin * sizeof(T);
    std::span<const T> chunk;
    if (aligned) {
      chunk = std::span<const T>(reinterpret_cast<const T*>(bytes), count);
    } else {
      std::memcpy(staging.data(), bytes, count * sizeof(T));
      chunk = std::span<const T>(staging.data(), count);
    }
    if (std::optional<Result> r = scan(chunk, begin)) return r;
    importer::ReleaseMappedPages(t, begin * sizeof(T), count * sizeof(T));
  }
  return std::nullopt;
}

template <typename T, typename IsFinite, typename Describe>
std::optional<NonFinite> ScanFinite(const ir::Tensor& t, const RowFilter& rows, IsFinite is_finite, Describe describe) {
  return ScanChunks<T, NonFinite>(t, [&](std::span<const T> v, size_t first) -> std::optional<NonFinite> {
    for (size_t i = 0; i < v.size(); ++i) {
      if (!is_finite(v[i]) && rows.Reports(first + i))
        return NonFinite{static_cast<int64_t>(first + i), describe(v[i])};
    }
    return std::nullopt;
  });
}

std::string DescribeDouble(double d) { return std::isnan(d) ? "nan" : (d > 0 ? "inf" : "-inf"); }

// Checks fp32, fp64, fp16 and bf16 tensors; other types have no non-finite values we can see.
std::optional<NonFinite> FirstNonFinite(const ir::Tensor& t, const RowFilter& rows) {
  switch (t.dtype()) {
    case DType::kFloat32:
      return ScanFinite<float>(
          t, rows, [](float f) { return std::isfinite(f); }, [](float f) { return DescribeDouble(f); });
    case DType::kFloat64:
      return ScanFinite<double>(
          t, rows, [](double d) { return std::isfinite(d); }, DescribeDouble);
    case DType::kFloat16:
      return ScanFinite<uint16_t>(
          t, rows, [](uint16_t h) { return (h & 0x7c00u) != 0x7c00u; },
          [](uint16_t h) { return (h & 0x03ffu) ? "nan" : ((h & 0x8000u) ? "-inf" : "inf"); });
    case DType::kBFloat16:
      return ScanFinite<uint16_t>(
          t, rows, [](uint16_t b) { return (b & 0x7f80u) != 0x7f80u; },
          [](uint16_t b) { return (b & 0x007fu) ? "nan" : ((b & 0x8000u) ? "-inf" : "inf"); });
    default:
      return std::nullopt;
  }
}

// The first class index outside [0, num_classes) (or negative when num_classes <= 0) that is not `ignore`.
struct BadLabel {
  int64_t index = 0;
  std::string value;
};

template <typename T>
std::optional<BadLabel> ScanLabels(const ir::Tensor& t, const RowFilter& rows, int64_t num_classes,
                                   std::optional<int64_t> ignore) {
  return ScanChunks<T, BadLabel>(t, [&](std::span<const T> v, size_t first) -> std::optional<BadLabel> {
    for (size_t i = 0; i < v.size(); ++i) {
      const T x = v[i];
      if (ignore && std::cmp_equal(x, *ignore)) continue;
      if ((std::cmp_less(x, 0) || (num_classes > 0 && std::cmp_greater_equal(x, num_classes))) &&
          rows.Reports(first + i)) {
        return BadLabel{static_cast<int64_t>(first + i), std::to_string(x)};
      }
    }
    return std::nullopt;
  });
}

std::optional<BadLabel> FirstBadLabel(const ir::Tensor& t, const RowFilter& rows, int64_t num_classes,
                                      std::optional<int64_t> ignore) {
  switch (t.dtype()) {
    case DType::kInt8:
      return ScanLabels<int8_t>(t, rows, num_classes, ignore);
    case DType::kUint8:
      return ScanLabels<uint8_t>(t, rows, num_classes, ignore);
    case DType::kInt16:
      return ScanLabels<int16_t>(t, rows, num_classes, ignore);
    case DType::kUint16:
      return ScanLabels<uint16_t>(t, rows, num_classes, ignore);
    case DType::kInt32:
      return ScanLabels<int32_t>(t, rows, num_classes, ignore);
    case DType::kUint32:
      return ScanLabels<uint32_t>(t, rows, num_classes, ignore);
    case DType::kInt64:
      return ScanLabels<int64_t>(t, rows, num_classes, ignore);
    case DType::kUint64:
      return ScanLabels<uint64_t>(t, rows, num_classes, ignore);
    default:
      return std::nullopt;
  }
}

// `t`'s elements converted to `To` (read a chunk at a time, so that a mapped array's pages are released as read).
template <typename From, typename To, typename Convert>
ir::Tensor ConvertElements(const ir::Tensor& t, DType to, Convert convert) {
  ir::Tensor out = ir::Tensor::Uninitialized(to, t.dims());
  To* dst = out.mutable_values<To>().data();
  ScanChunks<From, bool>(t, [&](std::span<const From> v, size_t first) -> std::optional<bool> {
    for (size_t i = 0; i < v.size(); ++i) dst[first + i] = convert(v[i]);
    return std::nullopt;
  });
  return out;
}

// Labels as the training graph reads them: class indices (any integer type, already checked to lie in range) as
// int64, targets (any float type) as float32. Arrays already of that type are shared, not copied.
ir::Tensor LabelsForLoss(const ir::Tensor& t, LabelKind kind) {
  if (kind == LabelKind::kClassIndices) {
    auto to_int64 = [](auto v) { return static_cast<int64_t>(v); };
    switch (t.dtype()) {
      case DType::kInt8:
        return ConvertElements<int8_t, int64_t>(t, DType::kInt64, to_int64);
      case DType::kUint8:
        return ConvertElements<uint8_t, int64_t>(t, DType::kInt64, to_int64);
      case DType::kInt16:
        return ConvertElements<int16_t, int64_t>(t, DType::kInt64, to_int64);
      case DType::kUint16:
        return ConvertElements<uint16_t, int64_t>(t, DType::kInt64, to_int64);
      case DType::kInt32:
        return ConvertElements<int32_t, int64_t>(t, DType::kInt64, to_int64);
      case DType::kUint32:
        return ConvertElements<uint32_t, int64_t>(t, DType::kInt64, to_int64);
      case DType::kUint64:
        return ConvertElements<uint64_t, int64_t>(t, DType::kInt64, to_int64);
      default:
        return t;
    }
  }
  switch (t.dtype()) {
    case DType::kFloat64:
      return ConvertElements<double, float>(t, DType::kFloat32, [](double v) { return static_cast<float>(v); });
    case DType::kFloat16:
      return ConvertElements<uint16_t, float>(t, DType::kFloat32, [](uint16_t b) { return HalfBitsToFloat(b); });
    case DType::kBFloat16:
      return ConvertElements<uint16_t, float>(t, DType::kFloat32, [](uint16_t b) { return BFloat16BitsToFloat(b); });
    default:
      return t;
  }
}

// Copies rows `indices` of `t` (which has `n` rows) into a new tensor; contiguous runs are copied at once.
ir::Tensor GatherRows(const ir::Tensor& t, int64_t n, const std::vector<int64_t>& indices) {
  std::vector<int64_t> dims = t.dims();
  dims[0] = static_cast<int64_t>(indices.size());
  if (t.dtype() == DType::kString) {
    ir::Tensor out(t.dtype(), dims);
    out.set_name(t.name());
    const size_t row = n > 0 ? t.strings().size() / static_cast<size_t>(n) : 0;
    for (size_t k = 0; k < indices.size(); ++k) {
      const auto from = t.strings().begin() + static_cast<ptrdiff_t>(static_cast<size_t>(indices[k]) * row);
      std::copy(from, from + static_cast<ptrdiff_t>(row),
                out.mutable_strings().begin() + static_cast<ptrdiff_t>(k * row));
    }
    return out;
  }
  ir::Tensor out = ir::Tensor::Uninitialized(t.dtype(), dims);
  out.set_name(t.name());
  const size_t row_bytes = n > 0 ? t.nbytes() / static_cast<size_t>(n) : 0;
  if (row_bytes == 0 || indices.empty()) return out;
  const std::byte* src = t.data();
  std::byte* dst = out.mutable_data();
  size_t k = 0;
  while (k < indices.size()) {
    size_t run = 1;
    while (k + run < indices.size() && indices[k + run] == indices[k] + static_cast<int64_t>(run)) ++run;
    std::memcpy(dst + k * row_bytes, src + static_cast<size_t>(indices[k]) * row_bytes, run * row_bytes);
    k += run;
  }
  return out;
}

// Checks that `array` fits model input `input`: its dtype, its rank and every fixed dim but the batch dim.
Status CheckFitsInput(const std::string& source, const ir::Tensor& array, const ModelInput& input) {
  const ir::ValueType& type = input.type;
  if (!type.defined()) return Status::Ok();
  if (!type.is_tensor()) {
    return Unimplemented(source, ": model input '", input.name, "' has type ", type.ToString(),
                         "; only tensor inputs can be fed from a data file");
  }
  if (type.elem_type() != DType::kUndefined && type.elem_type() != array.dtype()) {
    return InvalidArgument(source, ": array '", array.name(), "' for model input '", input.name, "' has dtype ",
                           DTypeName(array.dtype()), ", expected ", DTypeName(type.elem_type()));
  }
  if (!type.shape()) return Status::Ok();
  const ir::Shape& shape = *type.shape();
  const std::string prefix =
      StrCat(source, ": array '", array.name(), "' (shape ", ops::ShapeToString(array.dims()),
             ") does not fit model input '", input.name, "' (shape ", ir::ShapeToString(shape), "): ");
  if (array.rank() != static_cast<int64_t>(shape.size())) {
    return InvalidArgument(prefix, "rank ", array.rank(), ", expected ", shape.size());
  }
  for (size_t i = 1; i < shape.size(); ++i) {
    if (shape[i].is_value() && shape[i].value != array.dims()[i]) {
      return InvalidArgument(prefix, "dim ", i, " is ", array.dims()[i], ", expected ", shape[i].value);
    }
  }
  return Status::Ok();
}

constexpr char kNonFiniteHint[] = " (non-finite values are refused unless allowed)";

}  // namespace

std::vector<ModelInput> DataInputs(const ir::Graph& graph) {
  std::vector<ModelInput> inputs;
  for (const ir::Value* v : graph.inputs()) {
    if (v->initializer() || v->sparse_initializer()) continue;
    inputs.push_back(ModelInput{v->name(), v->type()});
  }
  return inputs;
}

StatusOr<std::vector<std::pair<std::string, std::string>>> ParseInputMap(const std::vector<std::string>& specs) {
  std::vector<std::pair<std::string, std::string>> map;
  std::set<std::string> seen;
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      return InvalidArgument("--input-map '", spec, "': expected NAME=ARRAY");
    }
    std::string input = spec.substr(0, eq);
    if (!seen.insert(input).second) return InvalidArgument("--input-map: model input '", input, "' is mapped twice");
    map.emplace_back(std::move(input), spec.substr(eq + 1));
  }
  return map;
}

StatusOr<Dataset> Dataset::Load(const std::string& path, const CsvOptions& csv) {
  if (IsCsvPath(path)) {
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> arrays, ReadCsv(path, csv));
    return FromTensors(std::move(arrays), path);
  }
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec) && std::filesystem::file_size(path, ec) == 0 && !ec) {
    return InvalidArgument(path, ": empty file");  // else each format has its own words for it
  }
  std::vector<ir::Tensor> arrays;
  const std::string extension = std::filesystem::path(path).extension().string();
  if (extension == ".npy") {
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor array, importer::MapNpyFile(path));
    arrays.push_back(std::move(array));
  } else if (extension == ".npz") {
    ONNXAMP_ASSIGN_OR_RETURN(arrays, importer::MapNpzFile(path));
  } else {
    ONNXAMP_ASSIGN_OR_RETURN(arrays, importer::ReadTensors(path));
  }
  if (arrays.size() == 1 && arrays[0].name().empty()) arrays[0].set_name(std::filesystem::path(path).stem().string());
  return FromTensors(std::move(arrays), path);
}

StatusOr<Dataset> Dataset::FromTensors(std::vector<ir::Tensor> arrays, std::string source) {
  if (arrays.empty()) return InvalidArgument(source, ": no arrays");
  std::set<std::string> names;
  for (const ir::Tensor& a : arrays) {
    if (!names.insert(a.name()).second) return InvalidArgument(source, ": two arrays are named '", a.name(), "'");
    if (!a.has_data()) return InvalidArgument(source, ": array '", a.name(), "' has no data");
    if (a.rank() == 0) {
      return InvalidArgument(source, ": array '", a.name(),
                             "' is a scalar; every array needs a first dimension of samples");
    }
    if (IsSubByte(a.dtype()) || (a.dtype() != DType::kString && DTypeBits(a.dtype()) < 8)) {
      return Unimplemented(source, ": array '", a.name(), "' has dtype ", DTypeName(a.dtype()),
                           ", which data loading does not support");
    }
    if (a.dims()[0] != arrays[0].dims()[0]) {
      return InvalidArgument(source, ": arrays disagree on the number of samples (first dim): '", arrays[0].name(),
                             "' has ", arrays[0].dims()[0], ", '", a.name(), "' has ", a.dims()[0]);
    }
  }
  if (arrays[0].dims()[0] == 0) return InvalidArgument(source, ": 0 samples (every array's first dim is 0)");
  Dataset d;
  d.source_ = std::move(source);
  d.num_samples_ = arrays[0].dims()[0];
  d.arrays_ = std::move(arrays);
  return d;
}

std::string Dataset::NamesList() const {
  return JoinNames(arrays_, [](const ir::Tensor& a) { return a.name(); });
}

const ir::Tensor* Dataset::Find(const std::string& name) const {
  for (const ir::Tensor& a : arrays_) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

StatusOr<Dataset> Dataset::Bind(const std::vector<ModelInput>& inputs, const BindOptions& options) const {
  for (const auto& [input, array] : options.input_map) {
    const bool known = std::any_of(inputs.begin(), inputs.end(), [&](const ModelInput& m) { return m.name == input; });
    if (!known) {
      const std::string names = JoinNames(inputs, [](const ModelInput& m) { return m.name; });
      return InvalidArgument("--input-map ", input, "=", array, ": the model has no input '", input,
                             "' (inputs: ", names, ")");
    }
  }
  Dataset bound;
  bound.source_ = source_;
  bound.num_samples_ = num_samples_;
  bound.rows_ = rows_;
  bound.mapped_reads_ = mapped_reads_;
  // A view reports only its own rows (the arrays hold others too).
  RowFilter filter;
  if (rows_) {
    filter.mask.assign(static_cast<size_t>(arrays_[0].dims()[0]), 0);
    for (int64_t r : *rows_) filter.mask[static_cast<size_t>(r)] = 1;
  }
  auto filter_for = [&](const ir::Tensor& a) -> const RowFilter& {
    filter.row_elements = std::max<int64_t>(1, RowElements(a, a.dims()[0]));
    return filter;
  };
  for (const ModelInput& input : inputs) {
    auto mapped = std::find_if(options.input_map.begin(), options.input_map.end(),
                               [&](const auto& entry) { return entry.first == input.name; });
    std::string name = mapped != options.input_map.end() ? mapped->second : input.name;
    const ir::Tensor* array = Find(name);
    if (!array && mapped == options.input_map.end() && inputs.size() == 1) {
      // One model input, and one array besides the labels (a CSV's 'features', an .npz's only other array): that
      // array feeds it.
      const ir::Tensor* only = nullptr;
      int others = 0;
      for (const ir::Tensor& a : arrays_) {
        if (a.name() != options.labels.array) {
          only = &a;
          ++others;
        }
      }
      if (others == 1) {
        array = only;
        name = only->name();
      }
    }
    if (!array) {
      if (mapped != options.input_map.end()) {
        return NotFound(source_, ": no array '", name, "' for model input '", input.name,
                        "' (mapped by --input-map; available: ", NamesList(), ")");
      }
      return NotFound(source_, ": no array '", name, "' for model input '", input.name, "' (available: ", NamesList(),
                      "; map another with --input-map ", input.name, "=ARRAY)");
    }
    ONNXAMP_RETURN_IF_ERROR(CheckFitsInput(source_, *array, input));
    if (!options.allow_non_finite) {
      if (std::optional<NonFinite> bad = FirstNonFinite(*array, filter_for(*array))) {
        return InvalidArgument(source_, ": array '", name, "' for model input '", input.name, "' has ", bad->what,
                               " at row ", bad->index / RowElements(*array, array->dims()[0]), kNonFiniteHint);
      }
    }
    ir::Tensor feature = *array;  // shares the bytes
    feature.set_name(input.name);
    bound.arrays_.push_back(std::move(feature));
  }
  const LabelSpec& spec = options.labels;
  if (!spec.array.empty()) {
    const ir::Tensor* labels = Find(spec.array);
    if (!labels) return NotFound(source_, ": no labels array '", spec.array, "' (available: ", NamesList(), ")");
    const std::string what = StrCat(source_, ": labels array '", spec.array, "' has ");
    if (spec.kind == LabelKind::kClassIndices) {
      if (!IsInteger(labels->dtype())) {
        return InvalidArgument(what, "dtype ", DTypeName(labels->dtype()), ", expected integer class indices");
      }
      if (std::optional<BadLabel> bad =
              FirstBadLabel(*labels, filter_for(*labels), spec.num_classes, spec.ignore_index)) {
        std::string range = spec.num_classes > 0 ? StrCat("outside [0, ", spec.num_classes, ")") : "a negative index";
        if (spec.ignore_index) range += StrCat(" and not the ignore_index ", *spec.ignore_index);
        return OutOfRange(what, bad->value, " at row ", bad->index / RowElements(*labels, labels->dims()[0]), ", ",
                          range);
      }
    } else {
      if (!IsFloatingPoint(labels->dtype())) {
        return InvalidArgument(what, "dtype ", DTypeName(labels->dtype()), ", expected floating-point targets");
      }
      if (!options.allow_non_finite) {
        if (std::optional<NonFinite> bad = FirstNonFinite(*labels, filter_for(*labels))) {
          return InvalidArgument(what, bad->what, " at row ", bad->index / RowElements(*labels, labels->dims()[0]),
                                 kNonFiniteHint);
        }
      }
    }
    ir::Tensor for_loss = LabelsForLoss(*labels, spec.kind);
    if (spec.kind == LabelKind::kFloatTargets && !options.allow_non_finite && for_loss.dtype() != labels->dtype()) {
      // float64 targets beyond float32's range
      if (std::optional<NonFinite> bad = FirstNonFinite(for_loss, filter_for(for_loss))) {
        return InvalidArgument(what, "a value beyond float32's range (", bad->what, " as float32) at row ",
                               bad->index / RowElements(for_loss, for_loss.dims()[0]));
      }
    }
    if (spec.sample_dims) {
      // Only size-1 dims may differ ([N, 1] labels for [N, C] logits, [N] targets for an [N, 1] output): declared
      // shapes can be wrong (exporters declare ranks the model does not compute), so anything else is left to the
      // loss, which checks the shapes it gets.
      const std::vector<int64_t> have(labels->dims().begin() + 1, labels->dims().end());
      const std::vector<int64_t>& want = *spec.sample_dims;
      auto without_ones = [](std::vector<int64_t> d) {
        d.erase(std::remove(d.begin(), d.end(), int64_t{1}), d.end());
        return d;
      };
      if (have != want && without_ones(have) == without_ones(want)) {
        std::vector<int64_t> dims = want;
        dims.insert(dims.begin(), labels->dims()[0]);
        for_loss = ir::Tensor::FromBuffer(for_loss.dtype(), std::move(dims), for_loss.buffer());
      }
    }
    for_loss.set_name(labels->name());
    bound.labels_index_ = bound.arrays_.size();
    bound.arrays_.push_back(std::move(for_loss));
  }
  if (bound.arrays_.empty())
    return InvalidArgument(source_, ": the model has no inputs to feed and no labels are named");
  return bound;
}

StatusOr<std::pair<Dataset, Dataset>> Dataset::Split(double fraction, uint64_t seed) const {
  if (!(fraction > 0.0 && fraction < 1.0)) {
    return InvalidArgument(source_, ": validation fraction ", fraction, " must lie strictly between 0 and 1");
  }
  const auto val_count = static_cast<int64_t>(std::llround(fraction * static_cast<double>(num_samples_)));
  if (val_count == 0 || val_count == num_samples_) {
    return InvalidArgument(source_, ": a validation fraction of ", fraction, " of ", num_samples_,
                           " samples leaves the ", val_count == 0 ? "validation" : "training", " set empty");
  }
  std::vector<int64_t> order = ShuffledIndices(num_samples_, SplitMix64Mix(seed ^ Fnv1a64("onnxamp.trainer.split")));
  std::vector<int64_t> val(order.begin(), order.begin() + val_count);
  std::vector<int64_t> train(order.begin() + val_count, order.end());
  std::sort(val.begin(), val.end());
  std::sort(train.begin(), train.end());
  // Views over the same arrays (sorted samples of a view map to sorted array rows).
  auto subset = [&](std::vector<int64_t> samples) {
    Dataset d = *this;
    d.num_samples_ = static_cast<int64_t>(samples.size());
    d.rows_ = std::make_shared<const std::vector<int64_t>>(ArrayRows(samples));
    return d;
  };
  return std::make_pair(subset(std::move(train)), subset(std::move(val)));
}

Status Dataset::CheckCompatible(const Dataset& other) const {
  bool same_names = other.arrays_.size() == arrays_.size();
  for (size_t i = 0; same_names && i < arrays_.size(); ++i) same_names = arrays_[i].name() == other.arrays_[i].name();
  if (!same_names) {
    return InvalidArgument(other.source_, ": arrays ", other.NamesList(), " do not match those of ", source_, ": ",
                           NamesList());
  }
  for (size_t i = 0; i < arrays_.size(); ++i) {
    const ir::Tensor& a = arrays_[i];
    const ir::Tensor& b = other.arrays_[i];
    if (a.dtype() != b.dtype() || SampleShape(a) != SampleShape(b)) {
      return InvalidArgument(other.source_, ": array '", b.name(), "' has dtype ", DTypeName(b.dtype()),
                             " and per-sample shape ", SampleShape(b), ", but in ", source_, " it has ",
                             DTypeName(a.dtype()), " ", SampleShape(a));
    }
  }
  return Status::Ok();
}

std::vector<int64_t> Dataset::ArrayRows(const std::vector<int64_t>& indices) const {
  if (!rows_) return indices;
  std::vector<int64_t> rows(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) rows[k] = (*rows_)[static_cast<size_t>(indices[k])];
  return rows;
}

void Dataset::ForEachRun(size_t k, const std::function<void(std::span<const std::byte>)>& visit) const {
  const ir::Tensor& a = arrays_[k];
  const int64_t n = a.dims()[0];
  if (a.dtype() == DType::kString || n == 0 || a.nbytes() == 0) return;
  const size_t row_bytes = a.nbytes() / static_cast<size_t>(n);
  const size_t max_rows = std::max<size_t>(1, kScanChunkBytes / row_bytes);
  auto run = [&](int64_t first, size_t count) {
    const size_t offset = static_cast<size_t>(first) * row_bytes;
    visit(std::span<const std::byte>(a.data() + offset, count * row_bytes));
    importer::ReleaseMappedPages(a, offset, count * row_bytes);
  };
  if (!rows_) {
    for (int64_t r = 0; r < n; r += static_cast<int64_t>(max_rows)) {
      run(r, std::min<size_t>(max_rows, static_cast<size_t>(n - r)));
    }
    return;
  }
  const std::vector<int64_t>& rows = *rows_;
  size_t i = 0;
  while (i < rows.size()) {
    size_t count = 1;
    while (i + count < rows.size() && count < max_rows && rows[i + count] == rows[i] + static_cast<int64_t>(count)) {
      ++count;
    }
    run(rows[i], count);
    i += count;
  }
}

void Dataset::NoteMappedReads(uint64_t bytes) const {
  MappedReads& reads = *mapped_reads_;
  if (reads.bytes.fetch_add(bytes) + bytes < reads.budget.load()) return;
  reads.bytes = 0;
  for (const ir::Tensor& a : arrays_) importer::ReleaseMappedPages(a, 0, a.nbytes());  // only mapped ones
}

StatusOr<std::vector<ir::Tensor>> MakeBatch(const Dataset& data, const std::vector<int64_t>& indices) {
  for (int64_t i : indices) {
    if (i < 0 || i >= data.num_samples()) {
      return OutOfRange(data.source(), ": sample index ", i, " is outside [0, ", data.num_samples(), ")");
    }
  }
  const std::vector<int64_t> rows = data.ArrayRows(indices);
  std::vector<ir::Tensor> batch;
  batch.reserve(data.arrays().size());
  uint64_t mapped_bytes = 0;  // about what the rows read map into the resident set
  for (const ir::Tensor& a : data.arrays()) {
    batch.push_back(GatherRows(a, a.dims()[0], rows));
    if (importer::IsMapped(a) && a.dims()[0] > 0) {
      const uint64_t row_bytes = a.nbytes() / static_cast<uint64_t>(a.dims()[0]);
      mapped_bytes += rows.size() * std::max(row_bytes, kFaultAroundBytes);
    }
  }
  if (mapped_bytes > 0) data.NoteMappedReads(mapped_bytes);
  return batch;
}

}  // namespace onnxamp::trainer
