// TrainProgress: what `zinf train` shows while it runs, on stderr (stdout carries the result).
// On a terminal one line redrawn in place — step, a bar, loss, tokens/s, ETA; otherwise plain step
// lines every `log_every` steps (and the first and last), which read well in CI logs and files.
// Eval results and checkpoints get their own lines in both modes. Quiet mode prints nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>

#include "libengine/train/step_metrics.h"

namespace zinf::cli {

enum class ProgressMode { kBar, kLines, kQuiet };

class TrainProgress {
 public:
  TrainProgress(std::ostream& err, ProgressMode mode, std::int64_t log_every, int width);
  void start(std::int64_t first_step, std::int64_t total_steps);
  // The compute threads and the cores this process may use: every progress line then says
  // "oversubscribed" while threads > cores or the 1-minute load average (/proc/loadavg, read per
  // line) exceeds the cores, since step times then measure the other jobs as much as zinf.
  void set_machine(int threads, int cores);
  void step(const train::StepMetrics& metrics);
  void eval(const train::EvalMetrics& metrics);
  void checkpoint(std::int64_t step, const std::filesystem::path& path, double seconds);
  // Ends a bar line so later output starts on a fresh line.
  void finish();

 private:
  void clear_bar();
  std::string oversubscribed() const;
  std::ostream& err_;
  ProgressMode mode_;
  std::int64_t log_every_;
  int width_;
  std::int64_t first_step_ = 0;
  std::int64_t total_steps_ = 0;
  bool bar_drawn_ = false;
  int threads_ = 0;  // 0: set_machine not called, nothing said
  int cores_ = 0;
  double smoothed_tokens_per_s_ = 0;  // exponential average: a bar that does not jitter
  std::chrono::steady_clock::time_point start_;
};

}  // namespace zinf::cli
