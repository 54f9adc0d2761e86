#include "libengine/train/safetensors_weights.h"

#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "libengine/core/quote.h"
#include "libengine/spec/json_input.h"
#include "libengine/train/safetensors_writer.h"

namespace zinf::train {
namespace fs = std::filesystem;

Result<std::unique_ptr<SafetensorsWeights>> SafetensorsWeights::open(const fs::path& path) {
  std::unique_ptr<SafetensorsWeights> weights(new SafetensorsWeights());
  weights->path_ = path;
  std::error_code ec;
  const auto add = [&](const fs::path& file) -> Result<SafetensorsReader*> {
    ZINF_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsReader> reader, SafetensorsReader::open(file));
    for (const SafetensorsTensor& tensor : reader->tensors()) {
      const auto [it, fresh] = weights->tensors_.emplace(tensor.name, Located{reader.get(), &tensor});
      if (!fresh) {
        return Status::invalid_argument(fmt::format("safetensors {}: tensor {} is also in {}", file.string(),
                                                    zinf::quoted(tensor.name), it->second.reader->path().string()));
      }
    }
    weights->readers_.push_back(std::move(reader));
    return weights->readers_.back().get();
  };
  if (!fs::is_directory(path, ec)) {
    if (!fs::exists(path, ec))
      return Status::not_found(fmt::format("safetensors {}: no such file or directory", path.string()));
    ZINF_RETURN_IF_ERROR(add(path).status());
    return weights;
  }
  if (fs::exists(path / "model.safetensors", ec)) {
    ZINF_RETURN_IF_ERROR(add(path / "model.safetensors").status());
    return weights;
  }
  const fs::path index_path = path / std::string(kSafetensorsIndexName);
  if (!fs::exists(index_path, ec)) {
    return Status::not_found(fmt::format("safetensors {}: the directory holds neither model.safetensors nor {}",
                                         path.string(), kSafetensorsIndexName));
  }
  ZINF_ASSIGN_OR_RETURN(const nlohmann::json index, spec::read_json_file(index_path.string()));
  const auto bad = [&](std::string why) {
    return Status::invalid_argument(fmt::format("safetensors index {}: {}", index_path.string(), why));
  };
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    return bad("weight_map is missing or not an object {tensor: file}");
  }
  std::map<std::string, std::set<std::string>> files;  // file -> the tensors the index puts there
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos) {
      return bad(fmt::format("weight_map.{} is not a file name in the directory", name));
    }
    files[file.get<std::string>()].insert(name);
  }
  for (const auto& [file, names] : files) {
    ZINF_ASSIGN_OR_RETURN(SafetensorsReader * reader, add(path / file));
    std::set<std::string> held;
    for (const SafetensorsTensor& tensor : reader->tensors()) held.insert(tensor.name);
    for (const std::string& name : names) {
      if (!held.contains(name))
        return bad(fmt::format("tensor {} is mapped to {}, which does not hold it", zinf::quoted(name), file));
    }
    for (const std::string& name : held) {
      if (!names.contains(name))
        return bad(fmt::format("{} holds tensor {}, which weight_map does not map to it", file, zinf::quoted(name)));
    }
  }
  return weights;
}

SafetensorsWeights::Located SafetensorsWeights::find(std::string_view name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? Located{} : it->second;
}

std::vector<std::string> SafetensorsWeights::names() const {
  std::vector<std::string> out;
  for (const auto& [name, located] : tensors_) out.push_back(name);
  return out;
}

}  // namespace zinf::train
