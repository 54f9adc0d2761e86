#include "libengine/spec/operator_tiling.h"

#include <array>
#include <string_view>

#include <fmt/format.h>

#include "libengine/core/units.h"

namespace zinf::spec {
namespace {

// zero/partition.h pads every slice to this many elements; spec may not include zero, and the rule
// only needs to count no less than the coordinator does.
constexpr std::int64_t kPadElements = 32;

struct TiledOperator {
  std::string_view name;
  std::int64_t out_features;
  std::int64_t in_features;
};

std::array<TiledOperator, 4> tiled_operators(const ModelShape& shape) {
  return {TiledOperator{"mlp.fc", shape.ffn_hidden, shape.hidden},
          TiledOperator{"mlp.proj", shape.hidden, shape.ffn_hidden}, TiledOperator{"head", shape.vocab, shape.hidden},
          TiledOperator{"embedding", shape.vocab, shape.hidden}};
}

std::string bytes_text(std::uint64_t bytes) { return format_bytes(static_cast<double>(bytes)); }

}  // namespace

std::uint64_t largest_tile_bytes(std::int64_t out_features, std::int64_t in_features, std::int64_t tiles,
                                 std::size_t element_bytes) {
  const std::int64_t rows = (out_features + tiles - 1) / tiles;
  const std::int64_t elements = (rows * in_features + kPadElements - 1) / kPadElements * kPadElements;
  return static_cast<std::uint64_t>(elements) * element_bytes;
}

Status validate_tiling(const OperatorTiling& tiling, const ModelShape& shape, std::string_view field) {
  const std::array<std::int64_t, 4> tiles{tiling.mlp_fc, tiling.mlp_proj, tiling.head, tiling.embedding};
  const auto operators = tiled_operators(shape);
  for (std::size_t i = 0; i < operators.size(); ++i) {
    if (tiles[i] < 1 || tiles[i] > operators[i].out_features) {
      return Status::invalid_argument(fmt::format("{}: {} tiles of {} is not in 1..{} (its output features)", field,
                                                  tiles[i], operators[i].name, operators[i].out_features));
    }
  }
  if (shape.tied_embeddings && tiling.head != tiling.embedding) {
    return Status::invalid_argument(
        fmt::format("{}: the head is tied to wte, so it has the embedding's tiles (head {}, embedding {})", field,
                    tiling.head, tiling.embedding));
  }
  return Status::ok();
}

Result<OperatorTiling> choose_tiling(const ModelShape& shape, std::size_t element_bytes, std::uint64_t max_live_bytes,
                                     std::string_view field) {
  const std::uint64_t half = max_live_bytes / 2;
  const auto untiled = [&](std::string_view name, std::int64_t rows, std::int64_t cols) -> Status {
    const std::uint64_t bytes = largest_tile_bytes(rows, cols, 1, element_bytes);
    if (bytes <= half) return Status::ok();
    return Status::invalid_argument(fmt::format(
        "{}: \"auto\" cannot fit {} ({}, not tiled) in half of zero.max_live_bytes ({}); raise zero.max_live_bytes "
        "to at least {}",
        field, name, bytes_text(bytes), bytes_text(half), bytes_text(2 * bytes)));
  };
  const std::int64_t q_width = shape.heads * shape.head_dim;
  ZINF_RETURN_IF_ERROR(
      untiled("blocks.*.attn.qkv.weight", q_width + 2 * shape.kv_heads * shape.head_dim, shape.hidden));
  ZINF_RETURN_IF_ERROR(untiled("blocks.*.attn.proj.weight", shape.hidden, q_width));
  if (shape.position == PositionKind::kLearned) {
    ZINF_RETURN_IF_ERROR(untiled("wpe", shape.max_positions, shape.hidden));
  }
  OperatorTiling out;
  std::array<std::int64_t*, 4> tiles{&out.mlp_fc, &out.mlp_proj, &out.head, &out.embedding};
  const auto operators = tiled_operators(shape);
  for (std::size_t i = 0; i < operators.size(); ++i) {
    const TiledOperator& op = operators[i];
    // The tile bytes fall as t grows (never rise), so the smallest fitting t is found by bisection.
    std::int64_t low = 1, high = op.out_features;
    if (2 * largest_tile_bytes(op.out_features, op.in_features, high, element_bytes) > max_live_bytes) {
      return Status::invalid_argument(fmt::format(
          "{}: \"auto\" cannot fit {} even one output row per tile ({} per tile) in half of zero.max_live_bytes ({}); "
          "raise zero.max_live_bytes",
          field, op.name, bytes_text(largest_tile_bytes(op.out_features, op.in_features, high, element_bytes)),
          bytes_text(half)));
    }
    while (low < high) {
      const std::int64_t mid = low + (high - low) / 2;
      if (2 * largest_tile_bytes(op.out_features, op.in_features, mid, element_bytes) <= max_live_bytes) {
        high = mid;
      } else {
        low = mid + 1;
      }
    }
    *tiles[i] = low;
  }
  // Tied, head and embedding are one table of the same shape: the same choice.
  return out;
}

std::string describe_choice(const OperatorTiling& tiling, bool automatic, const ZeroConfig& zero) {
  if (!automatic) return fmt::format("fixed: {}", describe(tiling));
  if (zero.stage < 3 || zero.params == Tier::kDevice) {
    return "auto: every operator untiled (parameters resident on the device: tiles would not shrink the working set)";
  }
  return fmt::format("auto: {} (each tile at most half of zero.max_live_bytes {})", describe(tiling),
                     bytes_text(zero.max_live_bytes));
}

std::string describe(const OperatorTiling& tiling) {
  return fmt::format("mlp.fc {}, mlp.proj {}, head {}, embedding {}", tiling.mlp_fc, tiling.mlp_proj, tiling.head,
                     tiling.embedding);
}

nlohmann::json to_json(const OperatorTiling& tiling) {
  return {
      {"mlp_fc", tiling.mlp_fc}, {"mlp_proj", tiling.mlp_proj}, {"head", tiling.head}, {"embedding", tiling.embedding}};
}

}  // namespace zinf::spec
