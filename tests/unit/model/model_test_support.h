// Test doubles for the model tests: a ParamSource holding every parameter resident (with values
// set by name) that records and checks the acquire/release discipline, a GradSink that records the
// grad_buffer/commit discipline, and the loader of the PyTorch fixture (tests/fixtures/gpt_tiny).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "libengine/model/param_source.h"
#include "libengine/model/param_table.h"

namespace zinf::model::testing {

// Every parameter resident in host vectors. Violations are counted, not thrown, so the model
// runs to the end and the test reports them.
class RecordingParams final : public ParamSource {
 public:
  explicit RecordingParams(const ParamTable& table) : table_(table), values_(static_cast<std::size_t>(table.size())) {
    for (ParamId id = 0; id < table.size(); ++id)
      values_[static_cast<std::size_t>(id)].resize(static_cast<std::size_t>(table[id].numel));
  }
  std::vector<float>& values(ParamId id) { return values_.at(static_cast<std::size_t>(id)); }

  Result<Tensor> acquire(ParamId id) override {
    if (held_.count(id) != 0) ++double_acquires;
    held_.insert(id);
    max_held = std::max(max_held, held_.size());
    ++acquires;
    return Tensor(values(id).data(), DType::kF32, table_[id].shape);
  }
  void release(ParamId id) override {
    if (held_.erase(id) == 0) ++unmatched_releases;
  }
  std::size_t still_held() const { return held_.size(); }

  int acquires = 0;
  int double_acquires = 0;
  int unmatched_releases = 0;
  std::size_t max_held = 0;

 private:
  const ParamTable& table_;
  std::vector<std::vector<float>> values_;
  std::set<ParamId> held_;
};

class RecordingGrads final : public GradSink {
 public:
  explicit RecordingGrads(const ParamTable& table)
      : table_(table),
        grads_(static_cast<std::size_t>(table.size())),
        commits_(static_cast<std::size_t>(table.size()), 0) {
    for (ParamId id = 0; id < table.size(); ++id)
      grads_[static_cast<std::size_t>(id)].assign(static_cast<std::size_t>(table[id].numel), 0.0f);
  }
  const std::vector<float>& grad(ParamId id) const { return grads_.at(static_cast<std::size_t>(id)); }
  int commits(ParamId id) const { return commits_.at(static_cast<std::size_t>(id)); }
  // Zeroes every buffer and forgets the commits (a new step).
  void reset() {
    for (auto& g : grads_) std::fill(g.begin(), g.end(), 0.0f);
    std::fill(commits_.begin(), commits_.end(), 0);
  }

  Result<Tensor> grad_buffer(ParamId id) override {
    if (commits(id) != 0) ++use_after_commit;
    return Tensor(grads_.at(static_cast<std::size_t>(id)).data(), DType::kF32, table_[id].shape);
  }
  Status commit(ParamId id) override {
    ++commits_.at(static_cast<std::size_t>(id));
    return Status::ok();
  }

  int use_after_commit = 0;

 private:
  const ParamTable& table_;
  std::vector<std::vector<float>> grads_;
  std::vector<int> commits_;
};

// One variant of tests/fixtures/gpt_tiny (see scripts/fixtures/make_gpt_fixture.py).
struct GptFixture {
  nlohmann::json manifest;
  std::map<std::string, std::vector<double>> values;  // by parameter name
  std::map<std::string, std::vector<double>> grads;
  std::vector<std::int32_t> tokens, targets;
  double loss = 0;
};

inline GptFixture load_gpt_fixture(const std::string& name) {
  const std::string dir = std::string(ZINF_FIXTURES_DIR) + "/gpt_tiny/";
  GptFixture f;
  std::ifstream manifest(dir + name + ".json");
  if (!manifest) throw std::runtime_error("cannot open " + dir + name + ".json");
  manifest >> f.manifest;
  const auto total = f.manifest["total_numel"].get<std::size_t>();
  const auto rows = f.manifest["batch"].get<std::size_t>() * f.manifest["seq"].get<std::size_t>();
  std::vector<double> blob(2 * total + 2 * rows);
  std::ifstream bin(dir + name + ".bin", std::ios::binary);
  bin.read(reinterpret_cast<char*>(blob.data()), static_cast<std::streamsize>(blob.size() * sizeof(double)));
  if (!bin) throw std::runtime_error("short read of " + dir + name + ".bin");
  for (const auto& p : f.manifest["params"]) {
    const auto offset = p["offset"].get<std::size_t>();
    std::size_t numel = 1;
    for (const auto& d : p["shape"]) numel *= d.get<std::size_t>();
    const auto key = p["name"].get<std::string>();
    f.values[key].assign(blob.begin() + static_cast<std::ptrdiff_t>(offset),
                         blob.begin() + static_cast<std::ptrdiff_t>(offset + numel));
    f.grads[key].assign(blob.begin() + static_cast<std::ptrdiff_t>(total + offset),
                        blob.begin() + static_cast<std::ptrdiff_t>(total + offset + numel));
  }
  for (std::size_t i = 0; i < rows; ++i) {
    f.tokens.push_back(static_cast<std::int32_t>(blob[2 * total + i]));
    f.targets.push_back(static_cast<std::int32_t>(blob[2 * total + rows + i]));
  }
  f.loss = f.manifest["loss"].get<double>();
  return f;
}

// The name of the whole tensor a (possibly tiled) parameter belongs to: "x.weight.tile2" -> "x.weight".
inline std::string untiled_name(const std::string& name) {
  const auto pos = name.find(".tile");
  return pos == std::string::npos ? name : name.substr(0, pos);
}

// Sets every parameter of `table` from whole tensors by name; a tiled parameter takes the next
// rows of its whole tensor (tiles come in order, split along the first dimension).
inline void set_params_by_name(const ParamTable& table, RecordingParams& params,
                               const std::map<std::string, std::vector<double>>& whole) {
  std::map<std::string, std::size_t> consumed;
  for (ParamId id = 0; id < table.size(); ++id) {
    const std::string key = untiled_name(table[id].name);
    const std::vector<double>& src = whole.at(key);
    std::size_t& at = consumed[key];
    std::vector<float>& dst = params.values(id);
    for (std::size_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<float>(src.at(at + i));
    at += dst.size();
  }
}

// Reassembles whole gradients by name from a (possibly tiled) table's gradients.
inline std::map<std::string, std::vector<double>> grads_by_name(const ParamTable& table, const RecordingGrads& grads) {
  std::map<std::string, std::vector<double>> out;
  for (ParamId id = 0; id < table.size(); ++id) {
    std::vector<double>& dst = out[untiled_name(table[id].name)];
    for (float g : grads.grad(id)) dst.push_back(g);
  }
  return out;
}

}  // namespace zinf::model::testing
