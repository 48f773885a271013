// load_model: config.json + generation_config.json + safetensors, bound to ModelWeights by the
// Hugging Face names of the Llama / Mistral / Qwen2 / Qwen3 decoder.
#include "model/loader.h"

#include <fmt/format.h>

#include <set>

#include "core/file_read.h"
#include "core/status.h"
#include "model/quant_load.h"
#include "model/quantize.h"
#include "model/safetensors.h"

namespace ceiling {

namespace {

struct Slot {
  ExpectedTensor want;
  TensorView* target;
  int layer = -1;  // a layer's projection: its layer and Proj
  Proj proj = kNumProj;
};

// The single source of truth for names, shapes and ModelWeights fields.
std::vector<Slot> slots(const ModelConfig& c, ModelWeights& w) {
  const int64_t V = c.vocab_size, H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  const int64_t Q = c.q_dim(), KV = c.kv_dim();
  std::vector<Slot> s;
  auto add = [&](std::string name, std::vector<int64_t> shape, TensorView* t, bool opt = false) {
    s.push_back({{std::move(name), std::move(shape), opt}, t});
  };
  auto proj = [&](int layer, Proj p, std::string name, std::vector<int64_t> shape, TensorView* t) {
    s.push_back({{std::move(name), std::move(shape), false}, t, layer, p});
  };
  w.layers.assign(static_cast<size_t>(c.num_layers), LayerWeights{});
  add("model.embed_tokens.weight", {V, H}, &w.embed);
  for (int i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const std::string p = fmt::format("model.layers.{}.", i);
    add(p + "input_layernorm.weight", {H}, &l.input_norm);
    proj(i, kQProj, p + "self_attn.q_proj.weight", {Q, H}, &l.q_proj);
    proj(i, kKProj, p + "self_attn.k_proj.weight", {KV, H}, &l.k_proj);
    proj(i, kVProj, p + "self_attn.v_proj.weight", {KV, H}, &l.v_proj);
    if (c.attention_bias) {
      add(p + "self_attn.q_proj.bias", {Q}, &l.q_bias);
      add(p + "self_attn.k_proj.bias", {KV}, &l.k_bias);
      add(p + "self_attn.v_proj.bias", {KV}, &l.v_bias);
    }
    if (c.qk_norm) {
      add(p + "self_attn.q_norm.weight", {D}, &l.q_norm);
      add(p + "self_attn.k_norm.weight", {D}, &l.k_norm);
    }
    proj(i, kOProj, p + "self_attn.o_proj.weight", {H, Q}, &l.o_proj);
    add(p + "post_attention_layernorm.weight", {H}, &l.post_attn_norm);
    proj(i, kGateProj, p + "mlp.gate_proj.weight", {I, H}, &l.gate_proj);
    proj(i, kUpProj, p + "mlp.up_proj.weight", {I, H}, &l.up_proj);
    proj(i, kDownProj, p + "mlp.down_proj.weight", {H, I}, &l.down_proj);
  }
  add("model.norm.weight", {H}, &w.final_norm);
  add("lm_head.weight", {V, H}, &w.lm_head, c.tie_word_embeddings);
  return s;
}

std::string shape_str(const std::vector<int64_t>& v) {
  return fmt::format("[{}]", fmt::join(v, ", "));
}

// A bias on a projection or norm ceiling applies without one: loading would silently drop it.
bool is_unsupported_bias(std::string_view name, const std::set<std::string, std::less<>>& known) {
  constexpr std::string_view kBias = ".bias";
  if (name.size() <= kBias.size() || name.substr(name.size() - kBias.size()) != kBias) return false;
  std::string weight(name.substr(0, name.size() - kBias.size()));
  return known.count(weight + ".weight") != 0;
}

}  // namespace

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& config) {
  ModelWeights scratch;
  std::vector<ExpectedTensor> out;
  for (auto& s : slots(config, scratch)) out.push_back(std::move(s.want));
  return out;
}

ModelWeights bind_weights(const ModelConfig& config, const SafetensorsSet& files,
                          std::vector<std::string>* unexpected, const ProgressFn& progress,
                          LoadProgress pr, const CheckpointQuant& quant) {
  ModelWeights w;
  const std::vector<Slot> want = slots(config, w);
  std::shared_ptr<WeightArena> arena;
  if (quant.method != QuantMethod::kNone) arena = std::make_shared<WeightArena>();
  std::vector<std::string> used;  // tensors of quantized projections and KV scales
  pr.tensors_total = static_cast<int>(files.tensors().size());
  pr.tensors_checked = 0;
  std::set<std::string, std::less<>> known;
  const std::string arch(arch_name(config.arch));
  for (const Slot& s : want) {
    known.insert(s.want.name);
    if (arena && s.proj != kNumProj) {
      const std::string prefix = s.want.name.substr(0, s.want.name.size() - 7);  // - ".weight"
      QuantLinear q =
          bind_quant_linear(files, prefix, s.want.shape[0], s.want.shape[1], quant, *arena, used);
      if (q.quantized()) {
        w.layers[static_cast<size_t>(s.layer)].quant[s.proj] = q;
        ++pr.tensors_checked;
        if (progress) progress(pr);
        continue;
      }
    }
    const SafetensorsSet::Entry* e = files.find(s.want.name);
    if (e == nullptr) {
      if (s.want.optional) continue;
      fail("{}: missing tensor {} (required by {} with this config.json)", files.origin().string(),
           quote_name(s.want.name), arch);
    }
    const std::string file = e->file->path().string();
    const TensorInfo& t = *e->info;
    const auto d = t.st->dtype;
    if (!d || (*d != DType::kF32 && *d != DType::kF16 && *d != DType::kBF16))
      fail("{}: tensor {} has dtype {}; weights must be F32, F16 or BF16 (bad dtype)", file,
           quote_name(t.name), t.st->name);
    if (t.shape != s.want.shape)
      fail("{}: tensor {} has shape {} but config.json implies {} (wrong shape)", file,
           quote_name(t.name), t.shape_str(), shape_str(s.want.shape));
    *s.target = files.view(t.name);
    ++pr.tensors_checked;
    if (progress) progress(pr);
  }
  if (config.tie_word_embeddings && w.lm_head.data == nullptr) w.lm_head = w.embed;
  for (int i = 0; i < config.num_layers; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const std::string p = fmt::format("model.layers.{}.self_attn.", i);
    l.k_scale = bind_scalar_scale(files, p + "k_scale", 1.0f, used);
    l.v_scale = bind_scalar_scale(files, p + "v_scale", 1.0f, used);
  }
  for (const std::string& name : used) known.insert(name);
  w.arena = arena;
  for (const auto& [name, e] : files.tensors()) {
    if (known.count(name)) continue;
    if (is_unsupported_bias(name, known))
      fail("{}: tensor {} is a bias that {} does not apply here (unsupported model variant)",
           e.file->path().string(), quote_name(name), arch);
    if (unexpected) unexpected->push_back(name);
    ++pr.tensors_checked;
    if (progress) progress(pr);
  }
  return w;
}

namespace {

// The format --quantization asks of a checkpoint quantized with `qc`; kDense: as it is.
WeightFormat requested_format(const LoadOptions& o, const CheckpointQuant& qc,
                              const std::string& origin) {
  const std::string& r = o.quantization;
  if (r.empty()) return WeightFormat::kDense;
  if (r == "fp8" || r == "int4") {
    const WeightFormat f = r == "fp8" ? WeightFormat::kFp8 : WeightFormat::kInt4;
    if (qc.method != QuantMethod::kNone && qc.format() != f)
      fail("{}: --quantization {} but the checkpoint is quantized with {} ({})", origin, r,
           quant_method_name(qc.method), weight_format_name(qc.format()));
    return f;
  }
  for (QuantMethod m : {QuantMethod::kCompressedTensors, QuantMethod::kFbgemmFp8, QuantMethod::kAwq,
                        QuantMethod::kGptq})
    if (r == quant_method_name(m)) {
      if (qc.method != m)
        fail(
            "{}: --quantization {} needs a checkpoint quantized with it (this one: {}; fp8 or "
            "int4 quantize a dense checkpoint on load)",
            origin, r, quant_method_name(qc.method));
      return qc.format();
    }
  fail(
      "--quantization {}: not supported (supported: fp8, int4, compressed-tensors, fbgemm_fp8, "
      "awq, gptq)",
      quote_text(r, 64));
}

}  // namespace

Model load_model(const std::filesystem::path& dir, const ProgressFn& progress,
                 const LoadOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) fail("{}: not a model directory", dir.string());
  Model m;
  m.dir = dir;
  m.config = load_model_config(dir);
  m.generation = load_generation_config(dir);
  LoadProgress last;
  auto track = [&](const LoadProgress& p) {
    last = p;
    if (progress) progress(p);
  };
  const std::string config_origin = (dir / "config.json").string();
  const CheckpointQuant qc = parse_quantization_config(
      read_model_file(dir, "config.json", "config", kMaxConfigJsonBytes), config_origin);
  const WeightFormat want = requested_format(options, qc, config_origin);
  m.files = SafetensorsSet::open_dir(dir, track);
  m.weights = bind_weights(m.config, *m.files, &m.unexpected_tensors, progress, last, qc);
  if (want != WeightFormat::kDense && qc.method == QuantMethod::kNone) {
    auto arena = std::make_shared<WeightArena>();
    quantize_projections(m.weights, want, options.int4_group_size, *arena);
    m.weights.arena = arena;
  }
  return m;
}

}  // namespace ceiling
