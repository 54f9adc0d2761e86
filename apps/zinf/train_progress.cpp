#include "apps/zinf/train_progress.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "libengine/core/units.h"

namespace zinf::cli {
namespace {

std::string tokens_rate(double tokens_per_s) { return format_count(tokens_per_s) + " tok/s"; }

}  // namespace

TrainProgress::TrainProgress(std::ostream& err, ProgressMode mode, std::int64_t log_every, int width)
    : err_(err), mode_(mode), log_every_(std::max<std::int64_t>(1, log_every)), width_(width) {}

void TrainProgress::start(std::int64_t first_step, std::int64_t total_steps) {
  first_step_ = first_step;
  total_steps_ = total_steps;
  start_ = std::chrono::steady_clock::now();
  if (mode_ != ProgressMode::kQuiet && first_step > 0) {
    clear_bar();
    err_ << fmt::format("resuming at step {} of {}\n", first_step, total_steps);
  }
}

void TrainProgress::set_machine(int threads, int cores) {
  threads_ = threads;
  cores_ = cores;
}

std::string TrainProgress::oversubscribed() const {
  if (threads_ <= 0 || cores_ <= 0) return {};
  if (threads_ > cores_)
    return fmt::format(" oversubscribed ({} threads on {} core{})", threads_, cores_, cores_ == 1 ? "" : "s");
  std::ifstream in("/proc/loadavg");
  double load = 0;
  if (in >> load && load > static_cast<double>(cores_)) {
    return fmt::format(" oversubscribed (load {:.1f} on {} core{})", load, cores_, cores_ == 1 ? "" : "s");
  }
  return {};
}

void TrainProgress::clear_bar() {
  if (bar_drawn_) {
    err_ << '\r' << std::string(static_cast<std::size_t>(std::max(0, width_ - 1)), ' ') << '\r';
    bar_drawn_ = false;
  }
}

void TrainProgress::step(const train::StepMetrics& m) {
  if (mode_ == ProgressMode::kQuiet) return;
  const double rate = m.tokens_per_s();
  smoothed_tokens_per_s_ = smoothed_tokens_per_s_ == 0 ? rate : 0.8 * smoothed_tokens_per_s_ + 0.2 * rate;
  const std::int64_t done = m.step + 1;
  const std::string skipped = m.skipped ? fmt::format(" (skipped: inf/NaN grads, scale {:g})", m.loss_scale) : "";
  // NVMe traffic of the step over its wall time, when states live there.
  const double nvme_bytes = static_cast<double>(m.engine.nvme_read.total() + m.engine.nvme_write.total());
  const std::string nvme = nvme_bytes > 0 && m.step_seconds > 0
                               ? fmt::format(" nvme {:.2f} GB/s", nvme_bytes / m.step_seconds / 1e9)
                               : std::string();
  // Communication between ranks: its busy time and the share of it compute did not wait for.
  const zero::EngineStats& e = m.engine;
  const std::string comm = e.comm_calls > 0 && e.comm_busy_seconds > 0
                               ? fmt::format(" comm {:.1f} ms ({:.0f}% hidden)", e.comm_busy_seconds * 1e3,
                                             e.comm_hidden_seconds() / e.comm_busy_seconds * 100.0)
                               : std::string();
  if (mode_ == ProgressMode::kLines) {
    if (done % log_every_ != 0 && done != total_steps_ && m.step != first_step_ && !m.skipped) return;
    err_ << fmt::format("step {:>{}}/{} loss {:.4f} lr {:.2e} grad_norm {:.3f} {} {:.1f} ms/step{}{}{}{}\n", done,
                        std::to_string(total_steps_).size(), total_steps_, m.loss, m.lr, m.grad_norm, tokens_rate(rate),
                        m.step_seconds * 1e3, nvme, comm, skipped, oversubscribed());
    err_.flush();
    return;
  }
  // Bar: "step  120/300 [########------------]  loss 1.2345  45.2k tok/s  ETA 12 s"
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const std::int64_t run_done = done - first_step_;
  const std::int64_t left = total_steps_ - done;
  const double eta_s = run_done > 0 ? elapsed / static_cast<double>(run_done) * static_cast<double>(left) : 0.0;
  const std::string tail =
      fmt::format("  loss {:.4f}  {}{}{}  ETA {}{}", m.loss, tokens_rate(smoothed_tokens_per_s_), nvme, comm,
                  left == 0 ? std::string("0 s") : format_duration(eta_s), oversubscribed());
  const std::string head = fmt::format("step {:>{}}/{} ", done, std::to_string(total_steps_).size(), total_steps_);
  const int bar_width = std::clamp(width_ - static_cast<int>(head.size() + tail.size()) - 3, 10, 40);
  const double fraction = total_steps_ > 0 ? static_cast<double>(done) / static_cast<double>(total_steps_) : 1.0;
  const int filled = static_cast<int>(std::lround(fraction * bar_width));
  err_ << '\r' << head << '[' << std::string(static_cast<std::size_t>(filled), '#')
       << std::string(static_cast<std::size_t>(bar_width - filled), '-') << ']' << tail;
  err_.flush();
  bar_drawn_ = true;
}

void TrainProgress::eval(const train::EvalMetrics& m) {
  if (mode_ == ProgressMode::kQuiet) return;
  clear_bar();
  err_ << fmt::format("eval after step {}: loss {:.4f} over {} held-out batches ({})\n", m.step + 1, m.loss, m.batches,
                      format_duration(m.seconds));
  err_.flush();
}

void TrainProgress::checkpoint(std::int64_t step, const std::filesystem::path& path, double seconds) {
  if (mode_ == ProgressMode::kQuiet) return;
  clear_bar();
  err_ << fmt::format("checkpoint at step {}: {} ({})\n", step, path.string(), format_duration(seconds));
  err_.flush();
}

void TrainProgress::finish() {
  if (bar_drawn_) {
    err_ << '\n';
    bar_drawn_ = false;
  }
}

}  // namespace zinf::cli
