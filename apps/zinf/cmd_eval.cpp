// `zinf eval --hf-config config.json | --scenario S  --weights DIR --tokens FILE --seq T --batch B
// [--batches N] [--token-bytes 2|4] [--format text|json]`: the mean next-token cross-entropy of
// given weights (Hugging Face safetensors, weights_source.h) on a token file (eval_tokens.h: uint16
// or uint32, flat or llm.c's header). Batching is llm.c's: batch k is B rows of T+1 consecutive
// tokens from token k·B·T, targets shifted by one; the result is the mean of the batches' mean
// losses (every batch has B·T targets, so it is also the mean over every target). Deterministic.
// Runs the model's forward pass on the CPU with every parameter resident in host memory (fp32).
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/zinf/cmd_eval.h"
#include "apps/zinf/plan_flags.h"
#include "apps/zinf/subcommand.h"
#include "libengine/core/units.h"
#include "libengine/device/cpu_device.h"
#include "libengine/model/gpt.h"
#include "libengine/spec/hf_config.h"
#include "libengine/spec/scenario.h"
#include "libengine/train/eval_tokens.h"
#include "libengine/train/weights_source.h"

namespace zinf::cli {
namespace {

// Every parameter resident in host memory, filled once from the weights.
class ResidentParams final : public model::ParamSource {
 public:
  explicit ResidentParams(const model::ParamTable& table) : table_(table) {
    for (model::ParamId id = 0; id < table.size(); ++id)
      values_.emplace_back(static_cast<std::size_t>(table[id].numel));
  }
  Status load(zero::CheckpointSource& source) {
    for (model::ParamId id = 0; id < table_.size(); ++id) {
      ZINF_RETURN_IF_ERROR(source.read(static_cast<std::size_t>(id), values_[static_cast<std::size_t>(id)]));
    }
    return Status::ok();
  }
  Result<Tensor> acquire(model::ParamId id) override {
    return Tensor(values_[static_cast<std::size_t>(id)].data(), DType::kF32, table_[id].shape);
  }
  void release(model::ParamId) override {}

 private:
  const model::ParamTable& table_;
  std::vector<std::vector<float>> values_;
};

class EvalCommand final : public Subcommand {
 public:
  explicit EvalCommand(CLI::App& app) {
    CLI::App* c = app.add_subcommand("eval", "Mean next-token cross-entropy of safetensors weights on a token file");
    auto* hf = c->add_option("--hf-config", hf_config_, "The model as a Hugging Face config.json")->type_name("FILE");
    auto* scenario = c->add_option("--scenario", scenario_, "The model of this scenario")->type_name("FILE");
    hf->excludes(scenario);
    c->add_option("--weights", weights_, "Safetensors file, or a directory with model.safetensors or shards + index")
        ->required()
        ->type_name("PATH");
    c->add_option("--tokens", tokens_, "Token file: uint16 or uint32, flat or with llm.c's header")
        ->required()
        ->type_name("FILE");
    c->add_option("--seq", seq_text_, "T: tokens per row")->required()->type_name("T");
    c->add_option("--batch", batch_text_, "B: rows per batch")->required()->type_name("B");
    c->add_option("--batches", batches_text_, "Evaluate batches 0..N-1 (default: every whole batch in the file)")
        ->type_name("N");
    c->add_option("--token-bytes", token_bytes_text_, "Width of a headerless token file: 2 (uint16) or 4 (uint32)")
        ->type_name("2|4")
        ->default_str("2");
    c->add_option("--format", format_, "text or json")->type_name("text|json")->default_str("text");
    c->footer(
        "Batch k is B rows of T+1 consecutive tokens starting at token k*B*T (row r at k*B*T + r*T); inputs are "
        "the first T of a row, targets the last T (llm.c's loader).");
  }

  Status run(const Io& io) override {
    if (format_ != "text" && format_ != "json") {
      return Status::invalid_argument(fmt::format("--format: '{}' is not allowed (allowed: text, json)", format_));
    }
    if (hf_config_.empty() == scenario_.empty()) {
      return Status::invalid_argument("zinf eval: give the model with --hf-config FILE or --scenario FILE");
    }
    spec::ModelShape shape;
    if (!hf_config_.empty()) {
      ZINF_ASSIGN_OR_RETURN(shape, spec::load_hf_config(hf_config_));
    } else {
      ZINF_ASSIGN_OR_RETURN(const spec::Scenario s, spec::load_scenario(scenario_, scenario_shape_resolver()));
      shape = s.shape;
    }
    ZINF_ASSIGN_OR_RETURN(const std::int64_t seq, parse_positive_int(seq_text_, "--seq"));
    ZINF_ASSIGN_OR_RETURN(const std::int64_t batch, parse_positive_int(batch_text_, "--batch"));
    ZINF_ASSIGN_OR_RETURN(const std::int64_t token_bytes, parse_int_in_range(token_bytes_text_, "--token-bytes", 2, 4));
    if (token_bytes == 3) return Status::invalid_argument("--token-bytes: 3 is not 2 or 4");
    model::GptConfig config;
    config.shape = shape;
    config.batch = batch;
    config.seq = seq;
    auto device = device::make_cpu_device({});
    ZINF_ASSIGN_OR_RETURN(std::unique_ptr<model::Gpt> gpt, model::Gpt::create(config, *device));
    ZINF_ASSIGN_OR_RETURN(std::unique_ptr<train::EvalTokens> tokens,
                          train::EvalTokens::open(tokens_, static_cast<int>(token_bytes)));
    const std::uint64_t available = tokens->batches(static_cast<std::uint64_t>(batch), static_cast<std::uint64_t>(seq));
    std::uint64_t batches = available;
    if (!batches_text_.empty()) {
      ZINF_ASSIGN_OR_RETURN(const std::int64_t n, parse_positive_int(batches_text_, "--batches", INT64_MAX));
      if (static_cast<std::uint64_t>(n) > available) {
        return Status::invalid_argument(
            fmt::format("--batches: {} is more than the {} batches of {}x{} tokens in {} "
                        "({} tokens)",
                        n, available, batch, seq, tokens_, tokens->token_count()));
      }
      batches = static_cast<std::uint64_t>(n);
    }
    if (batches == 0) {
      return Status::invalid_argument(fmt::format("--tokens: {} has {} tokens, fewer than one batch of {}x{} + 1",
                                                  tokens_, tokens->token_count(), batch, seq));
    }
    ResidentParams params(gpt->params());
    {
      ZINF_ASSIGN_OR_RETURN(std::unique_ptr<train::SafetensorsStateSource> source,
                            train::SafetensorsStateSource::open(weights_, shape, gpt->params(), nullptr));
      ZINF_RETURN_IF_ERROR(params.load(*source));
    }
    std::vector<std::int32_t> inputs, targets;
    std::vector<double> losses;
    double sum = 0.0;
    for (std::uint64_t k = 0; k < batches; ++k) {
      ZINF_RETURN_IF_ERROR(tokens->read_batch(k, static_cast<std::uint64_t>(batch), static_cast<std::uint64_t>(seq),
                                              static_cast<std::uint32_t>(shape.vocab), inputs, targets));
      ZINF_ASSIGN_OR_RETURN(const double loss, gpt->forward(inputs, targets, params));
      losses.push_back(loss);
      sum += loss;
    }
    const double mean = sum / static_cast<double>(batches);
    if (format_ == "json") {
      const nlohmann::json out = {{"kind", "eval"},
                                  {"loss", mean},
                                  {"batches", batches},
                                  {"batch", batch},
                                  {"seq", seq},
                                  {"tokens", tokens_},
                                  {"token_format", tokens->format()},
                                  {"weights", weights_},
                                  {"batch_losses", losses}};
      io.out << out.dump(2) << "\n";
    } else {
      io.out << fmt::format(
          "loss {:.6f} (mean next-token cross-entropy, nats) over {} batch(es) of {}x{} tokens from {} "
          "({}, {} tokens)\n",
          mean, batches, batch, seq, tokens_, tokens->format(), tokens->token_count());
    }
    return Status::ok();
  }

 private:
  std::string hf_config_;
  std::string scenario_;
  std::string weights_;
  std::string tokens_;
  std::string seq_text_;
  std::string batch_text_;
  std::string batches_text_;
  std::string token_bytes_text_ = "2";
  std::string format_ = "text";
};

}  // namespace

std::unique_ptr<Subcommand> add_eval_command(CLI::App& app) { return std::make_unique<EvalCommand>(app); }

}  // namespace zinf::cli
