// Progress bar and plain step lines.
#include "trainer/log/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "runtime/common/status.h"

namespace onnxamp::trainer {

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<long long>(std::llround(seconds));
  const long long h = total / 3600, m = total / 60 % 60, s = total % 60;
  char buf[48];
  if (h > 0) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", h, m, s);
  } else if (m > 0) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", m, s);
  } else {
    std::snprintf(buf, sizeof buf, "%llds", s);
  }
  return buf;
}

double EtaSeconds(const ProgressState& s) {
  if (s.steps_timed <= 0) return std::nan("");
  return static_cast<double>(std::max<int64_t>(s.total_steps - s.step, 0)) * s.elapsed /
         static_cast<double>(s.steps_timed);
}

std::string FormatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string FormatProgressLine(const ProgressState& s, int width) {
  const double fraction =
      s.total_steps > 0 ? std::clamp(static_cast<double>(s.step) / static_cast<double>(s.total_steps), 0.0, 1.0) : 0;
  const std::string head = StrCat("step ", s.step, "/", s.total_steps);
  char percent[8];
  std::snprintf(percent, sizeof percent, "%3d%%", static_cast<int>(std::floor(100 * fraction)));
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.0f", s.samples_per_second);
  const std::string tail =
      StrCat(" | epoch ", s.epoch, " | loss ", FormatNumber(s.loss), " | scale ", FormatNumber(s.loss_scale),
             " | skipped ", s.skipped, " | ", rate, " samples/s | ETA ", FormatDuration(EtaSeconds(s)));
  const int limit = std::max(width - 1, 1);
  // The bar takes what is left, between 10 and 30 cells; without room for 10 it is left out.
  const int room = limit - static_cast<int>(head.size() + tail.size()) - 4 - static_cast<int>(std::strlen(percent));
  std::string line = head;
  if (room >= 10) {
    const int cells = std::min(room, 30);
    const int filled = static_cast<int>(std::floor(fraction * cells));
    line += " [" + std::string(filled, '#') + std::string(cells - filled, '.') + "]";
  }
  line += StrCat(" ", percent, tail);
  if (static_cast<int>(line.size()) > limit) line.resize(limit);
  return line;
}

std::string FormatStepLine(const ProgressState& s) {
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.0f", s.samples_per_second);
  return StrCat("step ", s.step, "/", s.total_steps, "  epoch ", s.epoch, "  loss ", FormatNumber(s.loss), "  scale ",
                FormatNumber(s.loss_scale), "  skipped ", s.skipped, "  lr ", FormatNumber(s.lr), "  ", rate,
                " samples/s");
}

bool IsInteractiveTerminal(std::FILE* file) {
  if (!isatty(fileno(file))) return false;
  const char* term = std::getenv("TERM");
  return term == nullptr || std::strcmp(term, "dumb") != 0;
}

int TerminalWidth(std::FILE* file) {
  winsize ws{};
  if (ioctl(fileno(file), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* columns = std::getenv("COLUMNS"); columns != nullptr && std::atoi(columns) > 0) {
    return std::atoi(columns);
  }
  return 80;
}

bool ProgressBar::Update(const ProgressState& s, double now, bool force) {
  last_ = s;
  pending_ = true;
  if (!force && now - last_draw_ < min_interval_) return false;
  last_draw_ = now;
  Draw(s);
  return true;
}

void ProgressBar::Draw(const ProgressState& s) {
  // \r, the line, then erase to the end of the line (what a longer previous line left).
  std::fprintf(out_, "\r%s\x1b[K", FormatProgressLine(s, width_).c_str());
  std::fflush(out_);
  on_screen_ = true;
  pending_ = false;
}

void ProgressBar::PrintLine(const std::string& line) {
  std::fprintf(out_, "%s%s\n", on_screen_ ? "\r\x1b[K" : "", line.c_str());
  std::fflush(out_);
  on_screen_ = false;
  pending_ = true;  // redraw the bar at the next Update whatever the interval
  last_draw_ = -1e300;
}

void ProgressBar::Finish() {
  if (pending_ && last_.total_steps > 0) Draw(last_);
  if (on_screen_) std::fputc('\n', out_);
  std::fflush(out_);
  on_screen_ = false;
}

}  // namespace onnxamp::trainer
