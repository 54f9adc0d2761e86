// SafetensorsWeights: a model's weights as Hugging Face stores them, opened by one path: a
// `.safetensors` file, or a directory holding `model.safetensors` or the shards a
// `model.safetensors.index.json` names (safetensors_writer.h). Every file is opened and validated
// (SafetensorsReader::open) at open(); the index must map every tensor of every shard to the
// shard that holds it, each tensor in exactly one file.
//
// Not thread-safe (the readers' staging buffers).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "libengine/core/status.h"
#include "libengine/train/safetensors_reader.h"

namespace zinf::train {

class SafetensorsWeights {
 public:
  // NotFound when `path` does not exist or a directory holds neither model.safetensors nor the
  // index; InvalidArgument naming the file for a malformed file or index.
  static Result<std::unique_ptr<SafetensorsWeights>> open(const std::filesystem::path& path);

  struct Located {
    SafetensorsReader* reader = nullptr;
    const SafetensorsTensor* tensor = nullptr;
  };
  // The tensor `name` and the file that holds it; reader null when there is none.
  Located find(std::string_view name) const;
  // Every tensor name, sorted.
  std::vector<std::string> names() const;
  // What open() was given, for messages.
  const std::filesystem::path& path() const { return path_; }

 private:
  SafetensorsWeights() = default;
  std::filesystem::path path_;
  std::vector<std::unique_ptr<SafetensorsReader>> readers_;
  std::map<std::string, Located, std::less<>> tensors_;
};

}  // namespace zinf::train
