// A line printed only when a phase that is usually quick turns out slow: preparing a large model's
// states (page-locking tens of GiB, initialising billions of weights) can take minutes with nothing
// else on the screen, while a small scenario, or one refused during preparation, must keep its
// output as it is (an error stays one line).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

namespace zinf::cli {

class DelayedNotice {
 public:
  // Starts a thread that writes `line` (with a newline, then a flush) to `out` once `delay` has
  // passed, unless the notice is destroyed first. `out_mutex` must be held by every other writer
  // to `out` while the notice lives; the notice holds it while it writes. Both must outlive it.
  DelayedNotice(std::ostream& out, std::mutex& out_mutex, std::string line, std::chrono::milliseconds delay);
  // Cancels the line if it has not been written, and joins the thread. Never throws.
  ~DelayedNotice();
  DelayedNotice(const DelayedNotice&) = delete;
  DelayedNotice& operator=(const DelayedNotice&) = delete;

 private:
  std::ostream& out_;
  std::mutex& out_mutex_;
  const std::string line_;
  std::mutex state_mutex_;
  std::condition_variable cancelled_cv_;
  bool cancelled_ = false;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace zinf::cli
