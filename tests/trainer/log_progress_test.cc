// The progress bar and the plain step lines: durations and the ETA, the bar's layout at several terminal widths,
// the redraw rate limit, and lines printed while the bar is shown.
#include "trainer/log/progress.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

namespace onnxamp::trainer {
namespace {

using ::testing::HasSubstr;

std::string ReadAll(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int c; (c = std::fgetc(f)) != EOF;) s.push_back(static_cast<char>(c));
  return s;
}

ProgressState Example() {
  ProgressState s;
  s.step = 120;
  s.total_steps = 460;
  s.epoch = 3;
  s.loss = 0.1234;
  s.loss_scale = 65536;
  s.skipped = 2;
  s.lr = 1e-3;
  s.samples_per_second = 1234.4;
  s.elapsed = 60;
  s.steps_timed = 120;
  return s;
}

TEST(ProgressTest, FormatDuration) {
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(7.4), "7s");
  EXPECT_EQ(FormatDuration(59.6), "1:00");
  EXPECT_EQ(FormatDuration(65), "1:05");
  EXPECT_EQ(FormatDuration(754), "12:34");
  EXPECT_EQ(FormatDuration(3723), "1:02:03");
  EXPECT_EQ(FormatDuration(100 * 3600 + 1), "100:00:01");
  EXPECT_EQ(FormatDuration(-1), "?");
  EXPECT_EQ(FormatDuration(std::nan("")), "?");
  EXPECT_EQ(FormatDuration(INFINITY), "?");
}

TEST(ProgressTest, EtaFromThePaceOfTheTimedSteps) {
  ProgressState s = Example();
  EXPECT_DOUBLE_EQ(EtaSeconds(s), 340 * 0.5);
  // Resumed at step 100: 20 steps in 60 s, 340 to go.
  s.steps_timed = 20;
  EXPECT_DOUBLE_EQ(EtaSeconds(s), 340 * 3.0);
  s.step = s.total_steps;
  EXPECT_DOUBLE_EQ(EtaSeconds(s), 0);
  s.steps_timed = 0;
  EXPECT_TRUE(std::isnan(EtaSeconds(s)));
}

TEST(ProgressTest, LineAtSeveralWidths) {
  const ProgressState s = Example();
  const std::string tail = " | epoch 3 | loss 0.1234 | scale 65536 | skipped 2 | 1234 samples/s | ETA 2:50";
  // Wide: a 30-cell bar, 26% of it filled (7 cells).
  EXPECT_EQ(FormatProgressLine(s, 200), "step 120/460 [#######.......................]  26%" + tail);
  // 120 columns: the bar takes the 21 cells left (5 filled) and the line is 119 long.
  const std::string at120 = FormatProgressLine(s, 120);
  EXPECT_EQ(at120, "step 120/460 [#####................]  26%" + tail);
  EXPECT_EQ(at120.size(), 119u);
  // 80 columns: no room for a bar, and the line is cut at 79.
  const std::string at80 = FormatProgressLine(s, 80);
  EXPECT_EQ(at80, ("step 120/460  26%" + tail).substr(0, 79));
  ProgressState done = s;
  done.step = 460;
  EXPECT_EQ(FormatProgressLine(done, 200).substr(0, 50), "step 460/460 [##############################] 100%");
  EXPECT_THAT(FormatProgressLine(done, 200), HasSubstr("ETA 0s"));
}

TEST(ProgressTest, PlainLine) {
  EXPECT_EQ(FormatStepLine(Example()),
            "step 120/460  epoch 3  loss 0.1234  scale 65536  skipped 2  lr 0.001  1234 samples/s");
}

TEST(ProgressTest, RedrawsAtMostEveryIntervalAndEndsWithTheFinalState) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  ProgressBar bar(f, 200, 0.1);
  ProgressState s = Example();
  int drawn = 0;
  // 100 steps 5 ms apart (0.5 s): a draw at 0 and then one per 0.1 s.
  for (int i = 0; i < 100; ++i) {
    s.step = i + 1;
    drawn += bar.Update(s, 0.005 * i) ? 1 : 0;
  }
  EXPECT_GE(drawn, 5);
  EXPECT_LE(drawn, 6);
  bar.PrintLine("eval after step 100: validation loss 0.5");
  s.step = 101;
  EXPECT_TRUE(bar.Update(s, 0.5));  // the bar comes back right after a line
  s.step = 102;
  EXPECT_FALSE(bar.Update(s, 0.51));
  bar.Finish();
  const std::string out = ReadAll(f);
  std::fclose(f);
  EXPECT_EQ(out.find('\r'), 0u);
  EXPECT_THAT(out, HasSubstr("\r\x1b[Keval after step 100: validation loss 0.5\n\rstep 101/460"));
  // Finish drew step 102 (not drawn by its Update) and ended the line.
  const std::string last = "\rstep 102/460";
  ASSERT_NE(out.rfind(last), std::string::npos);
  EXPECT_EQ(out.back(), '\n');
  EXPECT_EQ(out.find('\n', out.rfind(last)), out.size() - 1);
}

}  // namespace
}  // namespace onnxamp::trainer
