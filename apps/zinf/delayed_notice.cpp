#include "apps/zinf/delayed_notice.h"

#include <utility>

namespace zinf::cli {
namespace {

class SteadyNoticeClock final : public NoticeClock {
 public:
  bool wait(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, std::chrono::milliseconds delay,
            const std::function<bool()>& cancelled) override {
    return cv.wait_for(lock, delay, cancelled);
  }
};

}  // namespace

std::unique_ptr<NoticeClock> NoticeClock::steady() { return std::make_unique<SteadyNoticeClock>(); }

DelayedNotice::DelayedNotice(std::ostream& out, std::mutex& out_mutex, std::string line,
                             std::chrono::milliseconds delay)
    : out_(out),
      out_mutex_(out_mutex),
      line_(std::move(line)),
      own_clock_(NoticeClock::steady()),
      clock_(*own_clock_),
      thread_([this, delay] { run(delay); }) {}

DelayedNotice::DelayedNotice(std::ostream& out, std::mutex& out_mutex, std::string line,
                             std::chrono::milliseconds delay, NoticeClock& clock)
    : out_(out), out_mutex_(out_mutex), line_(std::move(line)), clock_(clock), thread_([this, delay] { run(delay); }) {}

void DelayedNotice::run(std::chrono::milliseconds delay) {
  std::unique_lock<std::mutex> state(state_mutex_);
  if (clock_.wait(state, cancelled_cv_, delay, [this] { return cancelled_; })) return;
  state.unlock();
  const std::lock_guard<std::mutex> writing(out_mutex_);
  out_ << line_ << '\n' << std::flush;
}

DelayedNotice::~DelayedNotice() {
  {
    const std::lock_guard<std::mutex> state(state_mutex_);
    cancelled_ = true;
  }
  cancelled_cv_.notify_all();
  thread_.join();
}

}  // namespace zinf::cli
