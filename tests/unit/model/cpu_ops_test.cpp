// CpuOps: the column-block linear forwards to the kernels with the right offsets, and shape
// mismatches stop the program (ZINF_CHECK) — checked in a forked child, since they abort.
#include "libengine/device/cpu_ops.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <functional>
#include <vector>

#include "libengine/device/cpu_device.h"
#include "tests/catch.h"

namespace zinf::device {
namespace {

Tensor t(std::vector<float>& v, Shape shape) { return Tensor(v.data(), DType::kF32, shape); }

// True when `body` aborts (SIGABRT) in a child process.
bool aborts(const std::function<void()>& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    // The default action, not Catch's fatal-signal handler (which would report a failure from
    // the child); the check's message is silenced, the parent only looks at how the child ended.
    std::signal(SIGABRT, SIG_DFL);
    if (std::freopen("/dev/null", "w", stderr) == nullptr) _exit(2);
    if (std::freopen("/dev/null", "w", stdout) == nullptr) _exit(2);
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

TEST_CASE("CpuOps matmul writes and reads only its column block") {
  CpuOps ops;
  // out [2, 5]; the layer has OC = 2 and writes columns 1..2.
  std::vector<float> inp = {1, 2, 3, 4}, weight = {1, 0, 0, 1}, bias = {10, 20}, out(10, -7.0f);
  Tensor b = t(bias, {2});
  ops.matmul_forward(t(out, {2, 5}), 1, t(inp, {2, 2}), t(weight, {2, 2}), &b);
  CHECK(out == std::vector<float>{-7, 11, 22, -7, -7, -7, 13, 24, -7, -7});
  // Backward from dout's columns 3..4.
  std::vector<float> dout = {0, 0, 0, 1, 2, 0, 0, 0, 3, 4}, dinp(4, 5.0f), dweight(4, 0.0f), dbias(2, 1.0f);
  Tensor db = t(dbias, {2});
  ops.matmul_backward(t(dinp, {2, 2}), GradMode::kOverwrite, t(dweight, {2, 2}), &db, t(dout, {2, 5}), 3,
                      t(inp, {2, 2}), t(weight, {2, 2}));
  CHECK(dinp == std::vector<float>{1, 2, 3, 4});                        // dout block · identity, 5s overwritten
  CHECK(dweight == std::vector<float>{1 + 9, 2 + 12, 2 + 12, 4 + 16});  // doutᵀ · inp
  CHECK(dbias == std::vector<float>{1 + 4, 1 + 6});
  ops.matmul_backward(t(dinp, {2, 2}), GradMode::kAccumulate, t(dweight, {2, 2}), nullptr, t(dout, {2, 5}), 3,
                      t(inp, {2, 2}), t(weight, {2, 2}));
  CHECK(dinp == std::vector<float>{2, 4, 6, 8});
}

TEST_CASE("CpuOps zero, copy and the CPU device's ops()") {
  auto device = make_cpu_device({});
  Ops& ops = device->ops();
  CHECK(&ops == &device->ops());
  std::vector<float> a = {1, 2, 3}, b(3, 0.0f);
  ops.copy(t(b, {3}), t(a, {3}));
  CHECK(b == a);
  ops.zero(t(a, {3}));
  CHECK(a == std::vector<float>{0, 0, 0});
}

TEST_CASE("CpuOps rejects mismatched shapes") {
  CpuOps ops;
  std::vector<float> m(64, 0.0f), n(64, 0.0f), w(64, 0.0f), v(64, 0.0f);
  std::vector<std::int32_t> ids(4, 0);
  SECTION("matmul: inp's C differs from weight's") {
    CHECK(aborts([&] { ops.matmul_forward(t(m, {4, 3}), 0, t(n, {4, 5}), t(w, {3, 4}), nullptr); }));
  }
  SECTION("matmul: column block past the output") {
    CHECK(aborts([&] { ops.matmul_forward(t(m, {4, 3}), 1, t(n, {4, 4}), t(w, {3, 4}), nullptr); }));
  }
  SECTION("matmul: bias length") {
    Tensor bias = t(v, {2});
    CHECK(aborts([&] { ops.matmul_forward(t(m, {4, 3}), 0, t(n, {4, 4}), t(w, {3, 4}), &bias); }));
  }
  SECTION("matmul backward: dweight shape") {
    CHECK(aborts([&] {
      ops.matmul_backward(t(m, {4, 4}), GradMode::kOverwrite, t(v, {4, 3}), nullptr, t(n, {4, 3}), 0, t(m, {4, 4}),
                          t(w, {3, 4}));
    }));
  }
  SECTION("layernorm: weight length") {
    CHECK(aborts([&] {
      ops.layernorm_forward(t(m, {4, 4}), t(v, {4}), t(v, {4}), t(n, {4, 4}), t(w, {3}), t(w, {4}), 1e-5f);
    }));
  }
  SECTION("attention: qkv not (NH + 2 NKV) hd") {
    // C 4, NH 2, hd 2: the K/V part (3 columns) is not whole pairs of K and V heads.
    CHECK(aborts([&] { ops.attention_forward(t(m, {1, 2, 4}), t(v, {1, 2, 2}), t(n, {1, 2, 7})); }));
  }
  SECTION("attention: NH not a multiple of NKV") {
    // C 6, NH 3, hd 2, qkv 14 columns: NKV 2.
    CHECK(aborts([&] { ops.attention_forward(t(m, {1, 2, 6}), t(v, {1, 3, 2}), t(n, {1, 2, 14})); }));
  }
  SECTION("attention: heads do not divide C") {
    CHECK(aborts([&] { ops.attention_forward(t(m, {1, 2, 4}), t(v, {1, 3, 2}), t(n, {1, 2, 12})); }));
  }
  SECTION("embedding: token count") {
    CHECK(aborts([&] { ops.embedding_forward(t(m, {1, 3, 4}), ids, t(w, {8, 4}), t(v, {4, 4})); }));
  }
  SECTION("cross-entropy: target count") {
    CHECK(aborts([&] { ops.cross_entropy_forward(t(m, {3, 4}), ids); }));
  }
  SECTION("gelu: sizes") {
    CHECK(aborts([&] { ops.gelu_forward(t(m, {4}), t(n, {5})); }));
  }
  SECTION("a well-shaped call does not abort") {
    CHECK_FALSE(aborts([&] { ops.matmul_forward(t(m, {4, 3}), 0, t(n, {4, 4}), t(w, {3, 4}), nullptr); }));
  }
}

}  // namespace
}  // namespace zinf::device
