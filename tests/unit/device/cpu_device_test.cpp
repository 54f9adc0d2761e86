// The CPU backend of Device: the budgeted device tier (exact accounting, out-of-memory messages,
// bytes returned when buffers die), stream order, events ordering one stream after another,
// errors reported by synchronize(), latency-bound work run on the caller while a stream is idle,
// and Tensor views over device buffers.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "libengine/device/cpu_device.h"
#include "libengine/memory/memory_tier.h"
#include "libengine/tensor/tensor.h"
#include "tests/catch.h"

namespace {

using zinf::DType;
using zinf::ErrorCode;
using zinf::Shape;
using zinf::Status;
using zinf::Tensor;
using namespace zinf::device;

TEST_CASE("memory tier: reserve within the budget, refuse beyond it naming tier, request and use") {
  zinf::memory::MemoryTier tier("device", 1000);
  REQUIRE(tier.reserve(600, "a").is_ok());
  const Status refused = tier.reserve(500, "block 3 activations");
  CHECK(refused.code() == ErrorCode::kOutOfMemory);
  CHECK(refused.message() ==
        "out of memory on the device tier: 500 B for block 3 activations does not fit (600 B of the 1000 B budget in "
        "use)");
  REQUIRE(tier.reserve(400, "b").is_ok());  // exactly full is fine
  CHECK(tier.usage().current_bytes == 1000);
  tier.release(700);
  CHECK(tier.usage().current_bytes == 300);
  CHECK(tier.usage().peak_bytes == 1000);
  tier.reset_peak();
  CHECK(tier.usage().peak_bytes == 300);
  zinf::memory::MemoryTier unbounded("host", 0);
  CHECK(unbounded.reserve(std::uint64_t{1} << 50, "a lot").is_ok());  // counted, never refused
}

TEST_CASE("memory tier: concurrent reserves never exceed the budget") {
  zinf::memory::MemoryTier tier("device", 100 * 64);
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) granted += tier.reserve(64, "x").is_ok() ? 1 : 0;
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(granted == 100);
  CHECK(tier.usage().current_bytes == 100 * 64);
  CHECK(tier.usage().peak_bytes == 100 * 64);
}

TEST_CASE("cpu device: buffers are zeroed, aligned, counted, and give their bytes back") {
  auto device = make_cpu_device({.memory_budget_bytes = 1 << 20});
  CHECK(device->kind() == DeviceKind::kCpu);
  CHECK(device->describe() == "cpu (1.00 MiB budget)");
  {
    auto buffer = device->allocate(4096, "test buffer");
    REQUIRE(buffer.is_ok());
    CHECK(reinterpret_cast<std::uintptr_t>(buffer.value().data()) % 64 == 0);
    const auto* bytes = static_cast<const unsigned char*>(buffer.value().data());
    CHECK(std::all_of(bytes, bytes + 4096, [](unsigned char b) { return b == 0; }));
    CHECK(device->memory().usage().current_bytes == 4096);
    auto too_big = device->allocate(1 << 20, "the rest");
    REQUIRE_FALSE(too_big.is_ok());
    CHECK(too_big.status().message().find("the rest") != std::string::npos);
    CHECK(device->memory().usage().current_bytes == 4096);  // a refused request counts nothing
    DeviceBuffer moved = std::move(buffer).value();
    CHECK(device->memory().usage().current_bytes == 4096);
  }
  CHECK(device->memory().usage().current_bytes == 0);
  CHECK(device->memory().usage().peak_bytes == 4096);
}

TEST_CASE("cpu device: allocate_tensor gives a typed view of the buffer") {
  auto device = make_cpu_device({});
  auto owned = allocate_tensor(*device, DType::kBF16, Shape{3, 5}, "view");
  REQUIRE(owned.is_ok());
  const Tensor& t = owned.value().tensor;
  CHECK(t.bytes() == 30);
  CHECK(t.device() == device.get());
  CHECK(t.half() == owned.value().buffer.data());
  const Tensor rows = t.slice(1, 3);
  CHECK(rows.shape() == Shape{2, 5});
  CHECK(rows.data() == static_cast<std::byte*>(t.data()) + 10);
  CHECK(t.view(Shape{15}).numel() == 15);
  CHECK(Shape{4, 256, 1024}.to_string() == "[4, 256, 1024]");
}

TEST_CASE("cpu device: a transfer stream runs its work in order, off the calling thread") {
  auto device = make_cpu_device({});
  Stream& h2d = device->stream(StreamRole::kHostToDevice);
  std::vector<int> order;
  std::thread::id worker;
  for (int i = 0; i < 100; ++i) {
    h2d.enqueue([&order, &worker, i] {
      order.push_back(i);
      worker = std::this_thread::get_id();
      return Status::ok();
    });
  }
  REQUIRE(h2d.synchronize().is_ok());
  REQUIRE(order.size() == 100);
  for (int i = 0; i < 100; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
  CHECK(worker != std::this_thread::get_id());
}

TEST_CASE("cpu device: with copy_threads off the transfer streams run on the caller, in order, with events") {
  auto device = make_cpu_device({.memory_budget_bytes = 1 << 20, .copy_threads = false});
  CHECK(device->describe() == "cpu (1.00 MiB budget; copies on the calling thread)");
  for (const StreamRole role : {StreamRole::kHostToDevice, StreamRole::kDeviceToHost}) {
    Stream& stream = device->stream(role);
    std::vector<int> order;
    for (int i = 0; i < 10; ++i) {
      stream.enqueue([&order, i] {
        order.push_back(i);
        CHECK(i >= 0);
        return Status::ok();
      });
      CHECK(order.size() == static_cast<std::size_t>(i + 1));  // done before enqueue returned
    }
    // An event recorded there is reached at once; a copy enqueued there is done when it returns.
    std::unique_ptr<Event> event = device->create_event();
    stream.record(*event);
    CHECK(event->query());
    std::vector<float> from(64, 2.5f), to(64, 0.0f);
    device->copy(to.data(), from.data(), 64 * sizeof(float), CopyKind::kHostToDevice, stream);
    CHECK(to == from);
    // Errors still come back once, from synchronize().
    stream.enqueue([] { return Status::internal("copy failed"); });
    const Status first = stream.synchronize();
    CHECK(first.message() == "copy failed");
    CHECK(stream.synchronize().is_ok());
  }
  // The collective stream keeps its thread.
  std::thread::id ran_on;
  Stream& collective = device->stream(StreamRole::kCollective);
  collective.enqueue([&ran_on] {
    ran_on = std::this_thread::get_id();
    return Status::ok();
  });
  REQUIRE(collective.synchronize().is_ok());
  CHECK(ran_on != std::this_thread::get_id());
}

TEST_CASE("cpu device: an event orders a copy on one stream after work on another") {
  auto device = make_cpu_device({});
  Stream& h2d = device->stream(StreamRole::kHostToDevice);
  Stream& d2h = device->stream(StreamRole::kDeviceToHost);
  std::vector<float> source(1 << 16, 0.0f), staged(1 << 16, -1.0f), result(1 << 16, -1.0f);
  auto staged_ready = device->create_event();
  // h2d: a slow fill, then the copy into `staged`; d2h must wait for it before copying out.
  h2d.enqueue([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (std::size_t i = 0; i < source.size(); ++i) source[i] = static_cast<float>(i);
    return Status::ok();
  });
  device->copy(staged.data(), source.data(), source.size() * sizeof(float), CopyKind::kHostToDevice, h2d);
  h2d.record(*staged_ready);
  d2h.wait(*staged_ready);
  device->copy(result.data(), staged.data(), staged.size() * sizeof(float), CopyKind::kDeviceToHost, d2h);
  REQUIRE(d2h.synchronize().is_ok());
  CHECK(staged_ready->query());
  for (std::size_t i = 0; i < result.size(); i += 997) CHECK(result[i] == static_cast<float>(i));
  REQUIRE(device->synchronize().is_ok());
}

TEST_CASE("cpu device: event synchronize blocks the host until the stream reaches it") {
  auto device = make_cpu_device({});
  Stream& comm = device->stream(StreamRole::kCollective);
  std::atomic<bool> done{false};
  auto event = device->create_event();
  CHECK(event->query());  // never recorded: nothing to wait for
  comm.enqueue([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    done = true;
    return Status::ok();
  });
  comm.record(*event);
  REQUIRE(event->synchronize().is_ok());
  CHECK(done);
  CHECK(event->query());
}

TEST_CASE("cpu device: synchronize reports the first error a stream's work returned, once") {
  auto device = make_cpu_device({});
  for (StreamRole role : {StreamRole::kCompute, StreamRole::kHostToDevice}) {
    Stream& stream = device->stream(role);
    int ran = 0;
    stream.enqueue([&] {
      ++ran;
      return Status::io_error("first");
    });
    stream.enqueue([&] {
      ++ran;
      return Status::io_error("second");
    });
    const Status status = stream.synchronize();
    CHECK(ran == 2);  // later work still runs, in order
    CHECK(status.message() == "first");
    CHECK(stream.synchronize().is_ok());  // reported once
  }
  std::vector<char> bytes(64, 'x');
  device->zero(bytes.data(), bytes.size(), device->stream(StreamRole::kCompute));  // compute runs inline
  CHECK(std::all_of(bytes.begin(), bytes.end(), [](char c) { return c == 0; }));
}

}  // namespace

namespace {

TEST_CASE("cpu device: release_after frees a buffer only once its stream has passed the work before it") {
  auto device = make_cpu_device({.memory_budget_bytes = 1 << 20});
  Stream& h2d = device->stream(StreamRole::kHostToDevice);
  auto buffer = device->allocate(1 << 20, "in flight");
  REQUIRE(buffer.is_ok());
  std::atomic<bool> release{false};
  h2d.enqueue([&] {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return Status::ok();
  });
  device->release_after(std::move(buffer).value(), h2d);
  CHECK(device->pending_releases() == 1);
  CHECK(device->memory().usage().current_bytes == (1u << 20));  // still counted: the stream has not passed
  CHECK(device->reclaim_released(false) == 0);
  release = true;
  // The budget is full until the free happens: this allocation waits for it instead of failing.
  auto again = device->allocate(1 << 20, "after the free");
  REQUIRE(again.is_ok());
  CHECK(device->pending_releases() == 0);
  CHECK(device->memory().usage().current_bytes == (1u << 20));
}

}  // namespace

namespace {

// Latency-bound work (Stream::run_if_idle, enqueue_latency_bound): on the caller while the stream
// is idle, behind queued work otherwise, never two pieces of a stream's work at once.

TEST_CASE("cpu device: run_if_idle runs on the calling thread only while the stream is idle") {
  auto device = make_cpu_device({});
  Stream& comm = device->stream(StreamRole::kCollective);
  std::thread::id ran_on;
  auto note_thread = [&] {
    ran_on = std::this_thread::get_id();
    return Status::ok();
  };
  CHECK(comm.run_if_idle(note_thread));  // idle: ran here, finished before returning
  CHECK(ran_on == std::this_thread::get_id());

  std::atomic<bool> release{false};
  comm.enqueue([&] {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return Status::ok();
  });
  bool ran_inline = false;
  auto never = [&] {
    ran_inline = true;
    return Status::ok();
  };
  CHECK_FALSE(comm.run_if_idle(never));  // queued work ahead: not run, left to the caller
  CHECK_FALSE(ran_inline);
  enqueue_latency_bound(comm, note_thread);  // so it is queued behind the blocked work
  release = true;
  REQUIRE(comm.synchronize().is_ok());
  CHECK(ran_on != std::this_thread::get_id());  // run by the stream's worker
  CHECK_FALSE(ran_inline);

  // The compute stream runs everything on the caller anyway.
  ran_on = std::thread::id();
  CHECK(device->stream(StreamRole::kCompute).run_if_idle(note_thread));
  CHECK(ran_on == std::this_thread::get_id());
}

TEST_CASE("cpu device: inline and queued work mixed keep stream order and never overlap") {
  auto device = make_cpu_device({});
  Stream& comm = device->stream(StreamRole::kCollective);
  std::mutex order_mutex;
  std::vector<int> order;
  std::atomic<int> running{0};
  std::atomic<int> overlapped{0};
  int inline_runs = 0;
  auto task = [&](int index, bool slow) {
    return [&, index, slow] {
      if (running.fetch_add(1) != 0) ++overlapped;
      if (slow) std::this_thread::sleep_for(std::chrono::microseconds(300));
      {
        std::lock_guard lock(order_mutex);
        order.push_back(index);
      }
      running.fetch_sub(1);
      return Status::ok();
    };
  };
  const int n = 300;
  for (int i = 0; i < n; ++i) {
    if (i % 3 == 0) {
      comm.enqueue(task(i, i % 2 == 0));  // slow ones keep the stream busy for the next few
    } else {
      auto work = task(i, false);
      if (comm.run_if_idle(work)) {
        ++inline_runs;
      } else {
        comm.enqueue(work);
      }
    }
    if (i % 50 == 49) REQUIRE(comm.synchronize().is_ok());  // idle again: the next ones run inline
  }
  REQUIRE(comm.synchronize().is_ok());
  REQUIRE(order.size() == static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
  CHECK(overlapped == 0);
  CHECK(inline_runs > 0);  // at least the first after each synchronize()
  // An event recorded after inline work is reached once the stream passed it.
  auto event = device->create_event();
  auto noop = [] { return Status::ok(); };
  CHECK(comm.run_if_idle(noop));
  comm.record(*event);
  REQUIRE(event->synchronize().is_ok());
  CHECK(event->query());
}

TEST_CASE("cpu device: a failing inline task is reported by synchronize like a queued one") {
  auto device = make_cpu_device({});
  for (StreamRole role : {StreamRole::kCollective, StreamRole::kHostToDevice, StreamRole::kCompute}) {
    Stream& stream = device->stream(role);
    auto failing = [] { return Status::io_error("inline failed"); };
    REQUIRE(stream.run_if_idle(failing));
    stream.enqueue([] { return Status::io_error("queued failed"); });
    const Status status = stream.synchronize();
    CHECK(status.code() == ErrorCode::kIoError);
    CHECK(status.message() == "inline failed");  // the first error, in stream order
    CHECK(stream.synchronize().is_ok());         // reported once
  }
}

TEST_CASE("cpu device: work run inline on the collective stream counts as waiting for collectives") {
  auto device = make_cpu_device({});
  auto sleep = [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return Status::ok();
  };
  REQUIRE(device->stream(StreamRole::kHostToDevice).run_if_idle(sleep));
  CHECK(device->collective_wait_seconds() == 0.0);  // not the collective stream
  REQUIRE(device->stream(StreamRole::kCollective).run_if_idle(sleep));
  CHECK(device->collective_wait_seconds() > 0.0);
}

}  // namespace
