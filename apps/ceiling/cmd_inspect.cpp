// `ceiling inspect --model DIR`: what a Hugging Face model directory holds — architecture,
// parameters counted from the actual tensors, dtypes, weight and KV-cache memory, tensors the
// architecture does not use — and a roofline summary for the local GPU (else h100-sxm).
// Validates the whole directory like load_model; a model whose files parse but whose weights do
// not bind (missing tensor, FP8 weights, ...) still gets its file summary before the error.
#include <fmt/format.h>

#include <map>
#include <set>

#include "ceiling/command.h"
#include "ceiling/progress.h"
#include "core/file_read.h"
#include "core/status.h"
#include "model/loader.h"
#include "model/safetensors.h"
#if HAVE_CEILING_ROOFLINE && HAVE_CEILING_HW
#include "hw/gpu_spec.h"
#include "roofline/model_cost.h"
#endif

namespace ceiling::cli {
namespace {

std::string grouped(int64_t v) {
  std::string s = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return (v < 0 ? "-" : "") + out;
}

std::string human_bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.2f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{} B", static_cast<int64_t>(b));
}

void print_config(const ModelConfig& c) {
  fmt::print(
      "architecture  {}: {} layers, hidden {}, heads {}/{} (head_dim {}), intermediate {}, "
      "vocab {}\n",
      arch_name(c.arch), c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim,
      c.intermediate_size, c.vocab_size);
  std::string rope = fmt::format("theta {:g}", c.rope_theta);
  if (c.rope_scaling.type == RopeScaling::Type::kLlama3)
    rope += fmt::format(", llama3 scaling x{:g}", c.rope_scaling.factor);
  else if (c.rope_scaling.type == RopeScaling::Type::kLinear)
    rope += fmt::format(", linear scaling x{:g}", c.rope_scaling.factor);
  fmt::print(
      "              rope {}; max positions {}; tied embeddings {}; qkv bias {}; qk norm {}\n",
      rope, c.max_position_embeddings, c.tie_word_embeddings ? "yes" : "no",
      c.attention_bias ? "yes" : "no", c.qk_norm ? "yes" : "no");
}

void print_files(const SafetensorsSet& files) {
  const size_t n = files.files().size();
  fmt::print("files         {} ({} file{}, {}, {} tensors)\n", files.origin().filename().string(),
             n, n == 1 ? "" : "s", human_bytes(static_cast<double>(files.file_bytes())),
             files.tensors().size());
  std::map<std::string_view, std::pair<int64_t, int64_t>> by_dtype;  // name -> tensors, elements
  for (const auto& [name, e] : files.tensors()) {
    auto& [count, elems] = by_dtype[e.info->st->name];
    ++count;
    elems += e.info->numel();
  }
  std::string dt;
  for (const auto& [name, ce] : by_dtype)
    dt += fmt::format("{}{}: {} tensors ({} elements)", dt.empty() ? "" : "; ", name, ce.first,
                      grouped(ce.second));
  fmt::print("dtypes        {}\n", dt);
}

void print_weights(const Model& m) {
  // Distinct views (a tied lm_head is the embedding: counted once).
  std::set<const void*> seen;
  int64_t params = 0;
  double bytes = 0;
  auto add = [&](const TensorView& v) {
    if (v.data == nullptr || !seen.insert(v.data).second) return;
    params += v.numel();
    bytes += static_cast<double>(v.nbytes());
  };
  const ModelWeights& w = m.weights;
  add(w.embed);
  for (const auto& l : w.layers)
    for (const TensorView* v : {&l.input_norm, &l.q_proj, &l.k_proj, &l.v_proj, &l.q_bias,
                                &l.k_bias, &l.v_bias, &l.q_norm, &l.k_norm, &l.o_proj,
                                &l.post_attn_norm, &l.gate_proj, &l.up_proj, &l.down_proj})
      add(*v);
  std::map<std::string, int> quantized;  // "int4 g128" -> projections
  for (const auto& l : w.layers)
    for (const QuantLinear& q : l.quant) {
      if (!q.quantized()) continue;
      params += q.qweight.numel();
      bytes += static_cast<double>(q.qweight.nbytes() + q.scale.nbytes() + q.zero.nbytes());
      ++quantized[q.format == WeightFormat::kInt4 ? fmt::format("int4 g{}", q.group_size) : "fp8"];
    }
  for (const auto& [what, n] : quantized)
    fmt::print("quantized     {} projections {} (as loaded: one byte per value)\n", n, what);
  add(w.final_norm);
  add(w.lm_head);
  const ModelConfig& c = m.config;
  fmt::print("parameters    {} (from the tensors; config.json implies {}){}\n", grouped(params),
             grouped(c.num_params()),
             c.tie_word_embeddings && w.lm_head.data != w.embed.data
                 ? "; lm_head stored although tied"
                 : "");
  const int64_t kv_elems = int64_t{2} * c.num_layers * c.kv_dim();
  fmt::print("memory        weights {}; KV cache {} per token in bf16 ({} in fp8)\n",
             human_bytes(bytes), human_bytes(2.0 * static_cast<double>(kv_elems)),
             human_bytes(static_cast<double>(kv_elems)));
  if (m.unexpected_tensors.empty()) {
    fmt::print("unexpected    none\n");
  } else {
    std::string list;
    for (size_t i = 0; i < m.unexpected_tensors.size() && i < 8; ++i)
      list += (i ? ", " : "") + m.unexpected_tensors[i];
    if (m.unexpected_tensors.size() > 8) list += ", ...";
    fmt::print("unexpected    {} tensor{} (ignored): {}\n", m.unexpected_tensors.size(),
               m.unexpected_tensors.size() == 1 ? "" : "s", list);
  }
  const GenerationDefaults& g = m.generation;
  std::string gen;
  auto item = [&](const char* k, const auto& v) {
    if (v) gen += fmt::format("{}{} {}", gen.empty() ? "" : ", ", k, *v);
  };
  item("temperature", g.temperature);
  item("top_p", g.top_p);
  item("top_k", g.top_k);
  item("min_p", g.min_p);
  item("repetition_penalty", g.repetition_penalty);
  item("max_new_tokens", g.max_new_tokens);
  if (g.do_sample) gen += fmt::format("{}do_sample {}", gen.empty() ? "" : ", ", *g.do_sample);
  if (!g.eos_token_ids.empty())
    gen += fmt::format("{}eos {}", gen.empty() ? "" : ", ", fmt::join(g.eos_token_ids, "/"));
  fmt::print("generation    {}\n", gen.empty() ? "(no generation_config.json fields)" : gen);
}

#if HAVE_CEILING_ROOFLINE && HAVE_CEILING_HW
void print_roofline(const ModelConfig& c) {
  std::string gpu_id = "h100-sxm", why = "no local GPU";
  if (auto name = hw::local_device_name()) {
    if (auto id = hw::gpu_id_for_device_name(*name))
      gpu_id = *id, why = "local GPU";
    else
      why = "local GPU '" + *name + "' not in the table";
  }
  try {
    const roofline::GpuCeilings gpu = roofline::ceilings_for(gpu_id, /*measured=*/false);
    roofline::Scenario s;
    s.phase = roofline::Phase::kDecode;
    s.batch = 1;
    s.context = std::min(1024, c.max_position_embeddings - 1);
    const roofline::StepReport d = roofline::predict_step(c, gpu, s);
    s.phase = roofline::Phase::kPrefill;
    const roofline::StepReport p = roofline::predict_step(c, gpu, s);
    fmt::print("roofline      {} ({}, datasheet), bf16 weights and KV:\n", gpu_id, why);
    fmt::print("              decode batch 1, context {}: {:.3f} ms/token ({:.0f} tok/s), {}-bound",
               s.context, d.time_predicted_s * 1e3, d.tokens_per_s,
               roofline::limiter_name(d.limiter));
    if (d.critical_batch) fmt::print("; compute-bound from batch {}", *d.critical_batch);
    fmt::print("\n              prefill 1 x {} tokens: {:.2f} ms; KV room for {} sequences of {}\n",
               s.context, p.time_predicted_s * 1e3, d.memory.max_sequences, s.context);
  } catch (const Error& e) {
    fmt::print("roofline      n/a ({})\n", e.what());
  }
}
#endif

int run(const std::string& dir) {
  const ModelConfig config = load_model_config(dir);
  fmt::print("model         {}\n", dir);
  print_config(config);
  Model m;
  m.dir = dir;
  m.config = config;
  m.generation = load_generation_config(dir);
  {
    Progress progress("loading " + dir);
    LoadProgress last;
    const ProgressFn show = load_progress(progress);
    m.files = SafetensorsSet::open_dir(dir, [&](const LoadProgress& p) {
      last = p;
      show(p);
    });
    progress.done();
    print_files(*m.files);  // before binding: useful even when the weights do not bind
    const CheckpointQuant qc = parse_quantization_config(
        read_model_file(dir, "config.json", "config", kMaxConfigJsonBytes), dir + "/config.json");
    m.weights = bind_weights(m.config, *m.files, &m.unexpected_tensors, show, last, qc);
  }
  print_weights(m);
#if HAVE_CEILING_ROOFLINE && HAVE_CEILING_HW
  print_roofline(m.config);
#else
  fmt::print("roofline      n/a (built without the roofline module)\n");
#endif
  return 0;
}

std::function<int()> setup(CLI::App& sub) {
  auto dir = std::make_shared<std::string>();
  sub.add_option("--model", *dir, "Hugging Face model directory")->required();
  return [dir] { return run(*dir); };
}

CEILING_COMMAND("inspect",
                "validate a model directory; show its architecture, parameters, dtypes, memory and "
                "roofline",
                setup, 30);

}  // namespace
}  // namespace ceiling::cli
