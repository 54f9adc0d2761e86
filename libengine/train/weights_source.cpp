#include "libengine/train/weights_source.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "libengine/core/quote.h"

namespace zinf::train {
namespace {

std::string dims(std::span<const std::int64_t> shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// Tensors a save carries that are not parameters: GPT-2's causal-mask buffers.
bool is_buffer(std::string_view name) { return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias"); }

}  // namespace

Result<std::unique_ptr<SafetensorsStateSource>> SafetensorsStateSource::open(const std::filesystem::path& path,
                                                                             const spec::ModelShape& shape,
                                                                             const model::ParamTable& table,
                                                                             const zero::Partition* partition) {
  std::unique_ptr<SafetensorsStateSource> source(new SafetensorsStateSource(table, partition));
  ZINF_ASSIGN_OR_RETURN(source->weights_, SafetensorsWeights::open(path));
  ZINF_ASSIGN_OR_RETURN(const std::vector<model::HfTensor> tensors, model::hf_tensors(shape));
  const std::string where = fmt::format("init.safetensors {}", path.string());
  std::set<std::string> used;
  for (const model::HfTensor& t : tensors) {
    SafetensorsWeights::Located at = source->weights_->find(t.name);
    if (at.reader == nullptr && !t.alt_name.empty()) at = source->weights_->find(t.alt_name);
    if (at.reader == nullptr) {
      return Status::invalid_argument(fmt::format("{}: tensor {} (the model's {}, shape {}) is missing", where,
                                                  zinf::quoted(t.name), t.param, dims(t.shape)));
    }
    if (at.tensor->shape != t.shape) {
      return Status::invalid_argument(fmt::format("{}: tensor {} has shape {} in {}, the model needs {}", where,
                                                  zinf::quoted(at.tensor->name), dims(at.tensor->shape),
                                                  at.reader->path().string(), dims(t.shape)));
    }
    used.insert(at.tensor->name);
    source->bound_.push_back({t, at});
  }
  for (const std::string& name : source->weights_->names()) {
    if (!used.contains(name) && !is_buffer(name)) {
      return Status::invalid_argument(fmt::format(
          "{}: tensor {} is not a parameter of the model (a file of another model?)", where, zinf::quoted(name)));
    }
  }
  for (model::ParamId id = 0; id < table.size(); ++id) {
    const std::string whole = model::whole_name(table[id].name);
    if (std::none_of(source->bound_.begin(), source->bound_.end(),
                     [&](const Bound& b) { return b.hf.param == whole; })) {
      return Status::invalid_argument(
          fmt::format("{}: the model's parameter {} has no Hugging Face tensor", where, table[id].name));
    }
  }
  return source;
}

Status SafetensorsStateSource::read(std::size_t index, std::size_t offset, std::span<float> into) {
  const auto count = static_cast<std::size_t>(table_.size());
  if (index >= 3 * count) {
    return Status::invalid_argument(fmt::format("init.safetensors: array {} is not in the layout", index));
  }
  // Layout: master, adam_m, adam_v over the parameters in table order; fresh moments are zero.
  if (index >= count) {
    std::fill(into.begin(), into.end(), 0.0f);
    return Status::ok();
  }
  const auto id = static_cast<model::ParamId>(index);
  const model::ParamInfo& info = table_[id];
  const std::int64_t begin = partition_ != nullptr ? (*partition_)[id].begin : 0;
  return read_whole(model::whole_name(info.name), info.whole_offset + begin + static_cast<std::int64_t>(offset), into);
}

Status SafetensorsStateSource::read_whole(const std::string& whole, std::int64_t first, std::span<float> into) {
  const std::int64_t last = first + static_cast<std::int64_t>(into.size());
  for (const Bound& b : bound_) {
    const model::HfTensor& t = b.hf;
    if (t.param != whole) continue;
    const std::int64_t t_first = t.row_begin * t.cols;
    const std::int64_t from = std::max(first, t_first);
    const std::int64_t to = std::min(last, t_first + t.numel());
    if (from >= to) continue;
    const std::span<float> out =
        into.subspan(static_cast<std::size_t>(from - first), static_cast<std::size_t>(to - from));
    if (t.transform == model::HfTransform::kCopy) {
      // zinf's layout: the rank's elements straight from the file.
      ZINF_RETURN_IF_ERROR(b.at.reader->read(*b.at.tensor, static_cast<std::uint64_t>(from - t_first), out));
      elements_read_ += out.size();
      continue;
    }
    if (cached_ != t.name) {
      std::vector<float> hf(static_cast<std::size_t>(t.numel()));
      ZINF_RETURN_IF_ERROR(b.at.reader->read(*b.at.tensor, 0, hf));
      elements_read_ += hf.size();
      cached_rows_.resize(hf.size());
      // HF [cols, rows] -> zinf rows [rows, cols].
      for (std::int64_t c = 0; c < t.cols; ++c) {
        for (std::int64_t r = 0; r < t.rows; ++r) {
          cached_rows_[static_cast<std::size_t>(r * t.cols + c)] = hf[static_cast<std::size_t>(c * t.rows + r)];
        }
      }
      cached_ = t.name;
    }
    std::copy_n(cached_rows_.begin() + (from - t_first), out.size(), out.begin());
  }
  return Status::ok();
}

}  // namespace zinf::train
