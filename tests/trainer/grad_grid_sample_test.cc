// Finite-difference checks of GridSample's gradient (com.onnxamp GridSampleGrad) for X and grid: bilinear and bicubic
// with every padding mode and both align_corners, nearest for X (its grid gradient is zero), a grid reaching past the
// borders; and ReverseSequence's.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/runtime/op_tester.h"
#include "tests/trainer/grad_check.h"

namespace onnxamp::testing {
namespace {

using namespace gradtest;  // NOLINT

TEST(GridSampleGradTest, MatchesFiniteDifferences) {
  uint32_t seed = 50;
  for (const char* mode : {"bilinear", "bicubic", "nearest"}) {
    for (const char* padding : {"zeros", "border", "reflection"}) {
      for (int64_t align : {0, 1}) {
        OpTester t = Op("GridSample", 16);
        t.Attr(ir::Attribute::String("mode", mode)).Attr(ir::Attribute::String("padding_mode", padding));
        t.Attr(ir::Attribute::Int("align_corners", align));
        t.Input(Doubles({2, 2, 4, 5}, seed)).Input(Doubles({2, 3, 2, 2}, seed + 1, -1.3, 1.3));
        seed += 2;
        GradCheckOptions o;
        if (std::string(mode) == "nearest") o.wrt = {0};
        ExpectGradientsMatchFiniteDifferences(
            t, std::string("GridSample ") + mode + " " + padding + " align_corners " + std::to_string(align), o);
      }
    }
  }
}

TEST(GridSampleGradTest, OpsetTwentyNamesAndReverseSequence) {
  OpTester t = Op("GridSample", 20);
  t.Attr(ir::Attribute::String("mode", "cubic"));
  t.Input(Doubles({1, 2, 3, 3}, 60)).Input(Doubles({1, 2, 2, 2}, 61, -0.9, 0.9));
  ExpectGradientsMatchFiniteDifferences(t, "GridSample-20 cubic");

  for (int64_t batch_axis : {0, 1}) {
    OpTester r = Op("ReverseSequence", 10);
    r.Attr(ir::Attribute::Int("batch_axis", batch_axis)).Attr(ir::Attribute::Int("time_axis", 1 - batch_axis));
    r.Input(Doubles(batch_axis == 0 ? Dims{3, 4, 2} : Dims{4, 3, 2}, 62)).Input(Int64s({3}, {4, 0, 2}));
    ExpectGradientsMatchFiniteDifferences(r, "ReverseSequence batch_axis " + std::to_string(batch_axis));
  }
}

}  // namespace
}  // namespace onnxamp::testing
