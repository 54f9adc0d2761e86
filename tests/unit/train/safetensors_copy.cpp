// safetensors_copy IN OUT_DIR MAX_SHARD_BYTES: a test tool for the interop test
// (tests/cli/safetensors_test.py). Reads every tensor of IN (a file or a directory,
// SafetensorsWeights) to fp32 with zinf's reader and writes them, in name order with the same
// dtypes and shapes, with zinf's sharded writer into OUT_DIR. A failure is one line on stderr
// and exit 1, so the python test can check what a damaged input is refused with.
#include <cstdio>
#include <string>
#include <vector>

#include "libengine/train/safetensors_weights.h"
#include "libengine/train/safetensors_writer.h"

namespace {

zinf::Status copy(const std::string& in, const std::string& out, std::uint64_t max_shard_bytes) {
  using namespace zinf::train;
  ZINF_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsWeights> weights, SafetensorsWeights::open(in));
  std::vector<SafetensorsEntry> entries;
  for (const std::string& name : weights->names()) {
    const SafetensorsTensor& t = *weights->find(name).tensor;
    entries.push_back({name, t.dtype, t.shape});
  }
  ZINF_ASSIGN_OR_RETURN(std::unique_ptr<ShardedSafetensorsWriter> writer,
                        ShardedSafetensorsWriter::create(out, entries, max_shard_bytes, {{"format", "pt"}}));
  std::vector<float> values;
  for (const std::string& name : weights->names()) {
    const SafetensorsWeights::Located at = weights->find(name);
    values.resize(at.tensor->numel());
    ZINF_RETURN_IF_ERROR(at.reader->read(*at.tensor, 0, values));
    ZINF_RETURN_IF_ERROR(writer->append(values));
  }
  return writer->commit().status();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: safetensors_copy IN OUT_DIR MAX_SHARD_BYTES\n");
    return 2;
  }
  const zinf::Status status = copy(argv[1], argv[2], std::stoull(argv[3]));
  if (!status.is_ok()) {
    std::fprintf(stderr, "%s\n", status.message().c_str());
    return 1;
  }
  return 0;
}
