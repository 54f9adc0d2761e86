// A line printed only when a phase that is usually quick turns out slow: preparing a large model's
// states (page-locking tens of GiB, initialising billions of weights) can take minutes with nothing
// else on the screen, while a small scenario, or one refused during preparation, must keep its
// output as it is (an error stays one line).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

namespace zinf::cli {

// What the notice's thread waits with: the steady clock (NoticeClock::steady()), or a test's own
// clock that it moves by hand, so a test sees the line written at the delay and not before without
// sleeping or reading a real clock.
class NoticeClock {
 public:
  virtual ~NoticeClock() = default;
  // Blocks on `cv` (`lock` held on entry and on return, released while blocked) until `cancelled()`
  // or until `delay` has passed on this clock since the call. Returns cancelled(). Whoever makes
  // cancelled() true holds `lock`'s mutex while doing so and then notifies `cv`. Called from the
  // notice's thread; an implementation must be safe against its own other members' callers.
  virtual bool wait(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, std::chrono::milliseconds delay,
                    const std::function<bool()>& cancelled) = 0;
  // std::chrono::steady_clock through condition_variable::wait_for.
  static std::unique_ptr<NoticeClock> steady();
};

class DelayedNotice {
 public:
  // Starts a thread that writes `line` (with a newline, then a flush) to `out` once `delay` has
  // passed, unless the notice is destroyed first. `out_mutex` must be held by every other writer
  // to `out` while the notice lives; the notice holds it while it writes. Both must outlive it.
  DelayedNotice(std::ostream& out, std::mutex& out_mutex, std::string line, std::chrono::milliseconds delay);
  // The same, `delay` measured on `clock` (which must outlive the notice).
  DelayedNotice(std::ostream& out, std::mutex& out_mutex, std::string line, std::chrono::milliseconds delay,
                NoticeClock& clock);
  // Cancels the line if it has not been written, and joins the thread. Never throws.
  ~DelayedNotice();
  DelayedNotice(const DelayedNotice&) = delete;
  DelayedNotice& operator=(const DelayedNotice&) = delete;

 private:
  void run(std::chrono::milliseconds delay);

  std::ostream& out_;
  std::mutex& out_mutex_;
  const std::string line_;
  std::unique_ptr<NoticeClock> own_clock_;  // the steady clock, unless one was given
  NoticeClock& clock_;
  std::mutex state_mutex_;
  std::condition_variable cancelled_cv_;
  bool cancelled_ = false;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace zinf::cli
