// Console output of a training run: the progress bar redrawn in place on a terminal, and the plain step lines
// written everywhere else.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace onnxamp::trainer {

// What a progress line shows.
struct ProgressState {
  int64_t step = 0;  // steps done (1-based count of the last one)
  int64_t total_steps = 0;
  uint64_t epoch = 0;  // 1-based
  double loss = 0;
  double loss_scale = 1;
  int64_t skipped = 0;  // skipped steps so far
  double lr = 0;
  double samples_per_second = 0;
  double elapsed = 0;       // seconds spent in the steps this process ran (evaluation excluded)
  int64_t steps_timed = 0;  // how many steps `elapsed` covers (fewer than `step` after a resume)
};

// "7s", "1:05", "12:34", "1:02:03" (seconds rounded); "?" when negative or not finite.
std::string FormatDuration(double seconds);

// The time left at the pace so far: (total - step) * elapsed / steps_timed; NaN before the first timed step.
double EtaSeconds(const ProgressState& s);

// A number with 6 significant digits ("%.6g").
std::string FormatNumber(double v);

// The progress bar's line, without \r:
//   "step 120/460 [#######.............] 26% | epoch 3 | loss 0.123 | scale 65536 | skipped 2 | 1234 samples/s |
//    ETA 0:12"
// at most `width - 1` columns (the bar shrinks, then goes, then the line is cut), so it never wraps.
std::string FormatProgressLine(const ProgressState& s, int width);

// The plain line: "step 120/460  epoch 3  loss 0.123  scale 65536  skipped 2  lr 0.001  1234 samples/s".
std::string FormatStepLine(const ProgressState& s);

// Whether `file` is a terminal that can redraw a line (TERM is not "dumb"), and its width (COLUMNS, else 80).
bool IsInteractiveTerminal(std::FILE* file);
int TerminalWidth(std::FILE* file);

// Draws the progress line on `out` with \r, at most once per `min_interval` seconds.
class ProgressBar {
 public:
  ProgressBar(std::FILE* out, int width, double min_interval = 0.1)
      : out_(out), width_(width), min_interval_(min_interval) {}

  // Redraws if `force`, or if min_interval has passed since the last draw (`now`: seconds on a monotonic clock).
  // Returns whether it drew.
  bool Update(const ProgressState& s, double now, bool force = false);
  // Clears the bar, prints `line` and a newline; the bar comes back at the next Update.
  void PrintLine(const std::string& line);
  // Draws the last state once more (if it was not the last drawn) and ends the line.
  void Finish();

 private:
  void Draw(const ProgressState& s);

  std::FILE* out_;
  int width_;
  double min_interval_;
  double last_draw_ = -1e300;
  bool on_screen_ = false;  // the bar is the current line
  bool pending_ = false;    // `last_` was not drawn
  ProgressState last_;
};

}  // namespace onnxamp::trainer
