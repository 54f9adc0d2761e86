// NamedArray: a named, flat fp32 array that something else owns — how the owner of model states
// (zero/) hands its master parameters and optimizer moments to the checkpoint writer (train/) without
// either knowing the other. It lives here, below both, because zero/ may not depend on train/.
// What it is not: an owner, a shaped tensor, or a container of other element types.
#pragma once

#include <span>
#include <string>

namespace zinf {

struct NamedArray {
  std::string name;         // unique within one checkpoint: "master/blocks.3.attn.qkv.weight"
  std::span<float> values;  // the owner's memory; read by a save, overwritten by a load
};

}  // namespace zinf
