#include "apps/zinf/delayed_notice.h"

#include <utility>

namespace zinf::cli {

DelayedNotice::DelayedNotice(std::ostream& out, std::mutex& out_mutex, std::string line,
                             std::chrono::milliseconds delay)
    : out_(out), out_mutex_(out_mutex), line_(std::move(line)), thread_([this, delay] {
        std::unique_lock<std::mutex> state(state_mutex_);
        if (cancelled_cv_.wait_for(state, delay, [this] { return cancelled_; })) return;
        state.unlock();
        const std::lock_guard<std::mutex> writing(out_mutex_);
        out_ << line_ << '\n' << std::flush;
      }) {}

DelayedNotice::~DelayedNotice() {
  {
    const std::lock_guard<std::mutex> state(state_mutex_);
    cancelled_ = true;
  }
  cancelled_cv_.notify_all();
  thread_.join();
}

}  // namespace zinf::cli
