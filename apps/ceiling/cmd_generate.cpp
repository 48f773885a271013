// `ceiling generate`: one prompt -> a streamed completion on stdout, through the same path the
// server will take (load_model -> Ops -> forward over the paged KV cache -> sampler ->
// StreamDecoder), then a timing summary on stderr.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <random>

#include "ceiling/command.h"
#include "ceiling/progress.h"
#include "core/status.h"
#include "engine/ops_factory.h"
#include "engine/test_model.h"
#include "engine/text_generate.h"
#include "model/weights.h"
#include "tokenizer/template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace ceiling::cli {
namespace {

struct Args {
  std::string model = engine::default_model_dir().string();
  std::string prompt;
  std::optional<int> max_tokens, top_k, max_model_len;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  float presence_penalty = 0, frequency_penalty = 0;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  bool chat = false;
  std::string system;
  std::string device = "cpu";
  int threads = 0;
  int block_size = 16;
  bool no_graphs = false;
};

std::vector<int32_t> build_prompt(const Args& a, const Tokenizer& tok) {
  if (!a.chat) return tok.encode(a.prompt, /*add_special_tokens=*/true);
  const ChatTemplate tmpl = ChatTemplate::from_model_dir(a.model, /*has_tools=*/false);
  ChatTemplateInputs in;
  if (!a.system.empty()) in.messages.push_back({{"role", "system"}, {"content", a.system}});
  in.messages.push_back({{"role", "user"}, {"content", a.prompt}});
  in.add_generation_prompt = true;
  in.bos_token = tok.config().bos_token.value_or("");
  in.eos_token = tok.config().eos_token.value_or("");
  // As transformers' apply_chat_template: the template writes any BOS itself.
  return tok.encode(tmpl.render(in), /*add_special_tokens=*/false);
}

engine::GenerateOptions sampling_options(const Args& a, const Model& m, bool seeded) {
  const GenerationDefaults& g = m.generation;
  engine::GenerateOptions o;
  cpu::SamplingParams& p = o.sampling;
  // generation_config.json first; do_sample: false means greedy unless --temperature says else.
  p.temperature = g.do_sample.value_or(true) ? g.temperature.value_or(1.0f) : 0.0f;
  p.top_p = g.top_p.value_or(1.0f);
  p.top_k = g.top_k.value_or(0);
  p.min_p = g.min_p.value_or(0.0f);
  p.repetition_penalty = g.repetition_penalty.value_or(1.0f);
  o.max_new_tokens = g.max_new_tokens.value_or(256);
  if (a.temperature) p.temperature = *a.temperature;
  if (a.top_p) p.top_p = *a.top_p;
  if (a.top_k) p.top_k = *a.top_k;
  if (a.min_p) p.min_p = *a.min_p;
  if (a.repetition_penalty) p.repetition_penalty = *a.repetition_penalty;
  if (a.max_tokens) o.max_new_tokens = *a.max_tokens;
  p.presence_penalty = a.presence_penalty;
  p.frequency_penalty = a.frequency_penalty;
  p.seed = seeded ? a.seed : std::random_device{}();
  cpu::validate(p);
  return o;
}

int run(const Args& a, bool seeded) {
  const bool tty = stderr_is_tty();
  engine::OpsOptions oo;
  oo.n_threads = a.threads;
  oo.cuda_graphs = !a.no_graphs;
  if (tty)
    oo.upload_progress = [](uint64_t done, uint64_t total) {
      if (total > (256u << 20))
        fmt::print(stderr, "\r\033[Kuploading weights: {:.2f} / {:.2f} GB", done / 1e9,
                   total / 1e9);
    };
  auto ops = engine::make_ops(a.device, oo);  // fails fast for an unusable device
  const auto t0 = std::chrono::steady_clock::now();
  Model model;
  {
    Progress progress("loading " + a.model);
    model = load_model(a.model, load_progress(progress));
  }
  const Tokenizer tok = Tokenizer::from_dir(a.model);
  ops->upload(model.config, model.weights);
  if (tty) fmt::print(stderr, "\r\033[K");

  const std::vector<int32_t> prompt = build_prompt(a, tok);
  engine::GenerateOptions o = sampling_options(a, model, seeded);
  // Stop ids: generation_config.json, config.json and the tokenizer's EOS.
  for (int id : model.generation.eos_token_ids) o.stop_token_ids.push_back(id);
  for (int id : model.config.eos_token_ids) o.stop_token_ids.push_back(id);
  if (auto e = tok.eos_id()) o.stop_token_ids.push_back(*e);

  const int limit = a.max_model_len.value_or(model.config.max_position_embeddings);
  CEILING_ENSURE(limit > 0, "--max-model-len must be positive (got {})", limit);
  CEILING_ENSURE(static_cast<int>(prompt.size()) < limit,
                 "the prompt has {} tokens; max model length is {}", prompt.size(), limit);
  // The KV cache holds this request only: prompt + max_tokens, capped by the model length.
  const int64_t need = static_cast<int64_t>(prompt.size()) + o.max_new_tokens;
  engine::GeneratorLimits lim;
  lim.max_model_len = static_cast<int>(std::min<int64_t>(limit, need));
  lim.block_size = a.block_size;
  lim.max_tokens_per_step = std::min(512, lim.max_model_len);
  engine::Generator gen(*ops, lim);
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  const auto r = engine::generate_text(gen, tok, prompt, o, a.stop, [](std::string_view s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  });
  std::fputc('\n', stdout);
  std::fflush(stdout);
  const auto& st = r.tokens.stats;
  const double tps = st.decode_ms > 0 ? (st.generated_tokens - 1) * 1000.0 / st.decode_ms : 0.0;
  fmt::print(stderr,
             "[{} on {}] load {:.0f} ms | prompt {} tokens, prefill {:.1f} ms | generated {} "
             "tokens, {:.2f} ms/token, {:.1f} tok/s | finish: {} | seed {}\n",
             model.config.name, ops->name(), load_ms, st.prompt_tokens, st.prefill_ms,
             st.generated_tokens, st.ms_per_token(), tps,
             engine::finish_reason_name(r.tokens.finish), o.sampling.seed);
  return 0;
}

CEILING_COMMAND(
    "generate", "Generate a completion for one prompt (streams to stdout)",
    [](CLI::App& sub) -> std::function<int()> {
      auto a = std::make_shared<Args>();
      sub.add_option("--model", a->model,
                     "Hugging Face model directory (default: the bundled stories260K)");
      sub.add_option("--prompt", a->prompt, "Prompt text (may be empty)")->required();
      sub.add_option("--max-tokens", a->max_tokens,
                     "Tokens to generate (default: generation_config or 256)");
      sub.add_option("--temperature", a->temperature, "0 = greedy");
      sub.add_option("--top-p", a->top_p, "Nucleus sampling mass in (0, 1]");
      sub.add_option("--top-k", a->top_k, "Keep the k most likely tokens (0 = off)");
      sub.add_option("--min-p", a->min_p, "Drop tokens below min_p * p_max");
      sub.add_option("--repetition-penalty", a->repetition_penalty,
                     "HF-style penalty over prompt and output (1 = off)");
      sub.add_option("--presence-penalty", a->presence_penalty, "OpenAI-style");
      sub.add_option("--frequency-penalty", a->frequency_penalty, "OpenAI-style");
      auto* seed = sub.add_option("--seed", a->seed, "Sampling seed (default: random)");
      sub.add_option("--stop", a->stop, "Stop string (repeatable; not printed)");
      sub.add_flag("--chat", a->chat, "Wrap the prompt in the model's chat template");
      sub.add_option("--system", a->system, "System message (with --chat)");
      sub.add_option("--device", a->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
      sub.add_option("--max-model-len", a->max_model_len,
                     "Prompt + output limit (default: max_position_embeddings)");
      sub.add_option("--threads", a->threads, "CPU threads (default: all)");
      sub.add_option("--block-size", a->block_size, "KV cache block size");
      sub.add_flag("--no-graphs,--enforce-eager", a->no_graphs,
                   "cuda: run decode steps eagerly (no CUDA graphs)");
      return [a, seed] { return run(*a, seed->count() > 0); };
    },
    20);

}  // namespace
}  // namespace ceiling::cli
