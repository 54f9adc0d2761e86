// DelayedNotice (apps/zinf/delayed_notice.h): its line is written once the delay has passed and not
// before, and never when the notice is destroyed first. The delay runs on a clock the test moves by
// hand (ManualClock): the test knows when the notice's thread has looked at the clock and gone back
// to sleep, so "not before" is checked at a moment the thread has decided, without sleeping.
#include "apps/zinf/delayed_notice.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>

#include "tests/catch.h"

namespace zinf::cli {
namespace {

using std::chrono::milliseconds;

// A clock that moves only when advance() is called. It tells the test when the waiting thread has
// evaluated its deadline and gone (back) to sleep, and when its wait has returned.
class ManualClock final : public NoticeClock {
 public:
  bool wait(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, milliseconds delay,
            const std::function<bool()>& cancelled) override {
    {
      const std::lock_guard<std::mutex> guard(mutex_);
      deadline_ = now_ + delay;
      waiter_mutex_ = lock.mutex();
      waiter_cv_ = &cv;
    }
    // `lock` is held here, so advance() (which takes it before notifying) cannot slip in between
    // a look at the clock and the sleep.
    while (!cancelled() && !passed()) {
      note([this] { ++sleeps_; });
      cv.wait(lock);
    }
    const bool result = cancelled();
    note([this, result] {
      returned_ = true;
      cancelled_seen_ = result;
      waiter_mutex_ = nullptr;  // the notice's, which may go away now
      waiter_cv_ = nullptr;
    });
    return result;
  }

  // Moves the clock by `by` and wakes the waiter to look at it.
  void advance(milliseconds by) {
    std::mutex* waiter_mutex = nullptr;
    std::condition_variable* waiter_cv = nullptr;
    {
      const std::lock_guard<std::mutex> guard(mutex_);
      now_ += by;
      waiter_mutex = waiter_mutex_;
      waiter_cv = waiter_cv_;
    }
    if (waiter_cv == nullptr) return;
    { const std::lock_guard<std::mutex> waiter(*waiter_mutex); }
    waiter_cv->notify_all();
  }
  // Blocks until the waiter has gone to sleep more than `count` times (it looked at the clock).
  void await_sleeps_beyond(int count) {
    std::unique_lock<std::mutex> guard(mutex_);
    changed_.wait(guard, [&] { return sleeps_ > count; });
  }
  int sleeps() {
    const std::lock_guard<std::mutex> guard(mutex_);
    return sleeps_;
  }
  // Blocks until the waiter's wait has returned; whether it was cancelled.
  bool await_return() {
    std::unique_lock<std::mutex> guard(mutex_);
    changed_.wait(guard, [&] { return returned_; });
    return cancelled_seen_;
  }

 private:
  bool passed() {
    const std::lock_guard<std::mutex> guard(mutex_);
    return now_ >= deadline_;
  }
  void note(const std::function<void()>& change) {
    {
      const std::lock_guard<std::mutex> guard(mutex_);
      change();
    }
    changed_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  milliseconds now_{0};
  milliseconds deadline_{0};
  std::mutex* waiter_mutex_ = nullptr;
  std::condition_variable* waiter_cv_ = nullptr;
  int sleeps_ = 0;
  bool returned_ = false;
  bool cancelled_seen_ = false;
};

std::string written(std::ostringstream& out, std::mutex& out_mutex) {
  const std::lock_guard<std::mutex> guard(out_mutex);
  return out.str();
}

TEST_CASE("delayed notice: the line is written once the delay has passed, not a millisecond before") {
  ManualClock clock;
  std::ostringstream out;
  std::mutex out_mutex;
  std::optional<DelayedNotice> notice;
  notice.emplace(out, out_mutex, "preparing big: allocating...", milliseconds(3000), clock);
  clock.await_sleeps_beyond(0);
  CHECK(written(out, out_mutex).empty());
  // 2999 ms in: the thread looks at the clock and goes back to sleep, having written nothing.
  int sleeps = clock.sleeps();
  clock.advance(milliseconds(2000));
  clock.await_sleeps_beyond(sleeps);
  sleeps = clock.sleeps();
  clock.advance(milliseconds(999));
  clock.await_sleeps_beyond(sleeps);
  CHECK(written(out, out_mutex).empty());
  // 3000 ms: the wait ends uncancelled and the line is written (joined by the destructor).
  clock.advance(milliseconds(1));
  CHECK_FALSE(clock.await_return());
  notice.reset();
  CHECK(written(out, out_mutex) == "preparing big: allocating...\n");
}

TEST_CASE("delayed notice: destroyed before the delay, it writes nothing") {
  ManualClock clock;
  std::ostringstream out;
  std::mutex out_mutex;
  std::optional<DelayedNotice> notice;
  notice.emplace(out, out_mutex, "never", milliseconds(3000), clock);
  clock.await_sleeps_beyond(0);
  const int sleeps = clock.sleeps();
  clock.advance(milliseconds(2999));
  clock.await_sleeps_beyond(sleeps);
  notice.reset();  // cancels and joins
  CHECK(clock.await_return());
  CHECK(out.str().empty());
  // Past the delay afterwards: nothing is left to write it.
  clock.advance(milliseconds(10));
  CHECK(out.str().empty());
}

TEST_CASE("delayed notice: on the steady clock, a notice destroyed before its delay writes nothing") {
  std::ostringstream out;
  std::mutex out_mutex;
  { const DelayedNotice notice(out, out_mutex, "never", std::chrono::hours(1)); }
  CHECK(out.str().empty());
}

}  // namespace
}  // namespace zinf::cli
