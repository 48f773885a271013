#include "quant_fixtures.h"

#include <cmath>
#include <cstring>
#include <fstream>

#include "engine/test_model.h"
#include "model/loader.h"
#include "model/quant_load.h"
#include "model/quantize.h"
#include "model/safetensors_writer.h"

namespace ceiling::engine::testing {

namespace {

template <typename T>
FixtureTensor tensor(std::string name, DType dt, std::vector<int64_t> shape,
                     const std::vector<T>& v) {
  FixtureTensor t{std::move(name), dt, std::move(shape), {}};
  t.bytes.resize(v.size() * sizeof(T));
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

bool is_projection(const std::string& name) {
  return name.size() > 12 && name.substr(name.size() - 12) == "_proj.weight";
}

// AutoAWQ / GPTQ pack 8 nibbles into an int32: nibble i (bits 4i..) gets value vals[i].
int32_t pack8(const int (&vals)[8]) {
  uint32_t w = 0;
  for (int i = 0; i < 8; ++i) w |= static_cast<uint32_t>(vals[i] & 0xf) << (4 * i);
  int32_t r;
  std::memcpy(&r, &w, 4);
  return r;
}

void add_int4(std::vector<FixtureTensor>& out, const std::string& p, const QuantLinear& q,
              int64_t N, int64_t K, bool awq) {
  const int64_t G = q.group_size, ng = K / G;
  const uint8_t* qw = q.qweight.as<const uint8_t>();
  const uint8_t* z = q.zero.as<const uint8_t>();
  const float* s = q.scale.as<const float>();
  std::vector<int32_t> packed, zeros;
  int v[8];
  if (awq) {  // AutoAWQ: intweight [K, N]; word (k, j) nibble i = column 8j + order_map[i]
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N / 8; ++j) {
        for (int i = 0; i < 8; ++i) v[i] = qw[(8 * j + kAwqOrder[i]) * K + k];
        packed.push_back(pack8(v));
      }
  } else {  // GPTQ: intweight [K, N]; word (r, n) nibble i = row 8r + i
    for (int64_t r = 0; r < K / 8; ++r)
      for (int64_t n = 0; n < N; ++n) {
        for (int i = 0; i < 8; ++i) v[i] = qw[n * K + 8 * r + i];
        packed.push_back(pack8(v));
      }
  }
  for (int64_t g = 0; g < ng; ++g)  // zeros [K/G, N] packed along N, AWQ order for AWQ
    for (int64_t j = 0; j < N / 8; ++j) {
      for (int i = 0; i < 8; ++i)
        v[i] = awq ? z[(8 * j + kAwqOrder[i]) * ng + g] : z[(8 * j + i) * ng + g] - 1;  // v1: z − 1
      zeros.push_back(pack8(v));
    }
  std::vector<uint16_t> scales;
  for (int64_t g = 0; g < ng; ++g)
    for (int64_t n = 0; n < N; ++n) scales.push_back(f32_to_f16(s[n * ng + g]));
  if (awq)
    out.push_back(tensor(p + ".qweight", DType::kI32, {K, N / 8}, packed));
  else
    out.push_back(tensor(p + ".qweight", DType::kI32, {K / 8, N}, packed));
  out.push_back(tensor(p + ".qzeros", DType::kI32, {ng, N / 8}, zeros));
  out.push_back(tensor(p + ".scales", DType::kF16, {ng, N}, scales));
  if (!awq) {
    std::vector<int32_t> g_idx;
    for (int64_t k = 0; k < K; ++k) g_idx.push_back(static_cast<int32_t>(k / G));
    out.push_back(tensor(p + ".g_idx", DType::kI32, {K}, g_idx));
  }
}

void add_fp8(std::vector<FixtureTensor>& out, const std::string& p, const TensorView& w,
             const FixtureOptions& o, WeightArena& arena) {
  const int64_t N = w.dim(0), K = w.dim(1);
  QuantLinear q = quantize_fp8(w, arena);
  std::vector<float> scale(q.scale.as<float>(), q.scale.as<float>() + N);
  if (o.per_tensor_fp8) {  // one scale: requantize every row with the largest
    const float s = *std::max_element(scale.begin(), scale.end());
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k)
        q.qweight.as<uint8_t>()[n * K + k] =
            f32_to_e4m3(load_as_f32(w.data, w.dtype, static_cast<size_t>(n * K + k)) / s);
    scale.assign(1, s);
  }
  std::vector<uint8_t> bytes(q.qweight.as<uint8_t>(), q.qweight.as<uint8_t>() + N * K);
  out.push_back(tensor(p + ".weight", DType::kF8E4M3, {N, K}, bytes));
  out.push_back(o.per_tensor_fp8 ? tensor(p + ".weight_scale", DType::kF32, {1}, scale)
                                 : tensor(p + ".weight_scale", DType::kF32, {N, 1}, scale));
  const bool fbgemm = o.layout == Layout::kFbgemm;
  out.push_back(tensor(p + (fbgemm ? ".input_scale_ub" : ".input_scale"), DType::kF32, {1},
                       std::vector<float>{fbgemm ? 1200.0f : 0.25f}));
}

nlohmann::json quant_config(const FixtureOptions& o) {
  using nlohmann::json;
  switch (o.layout) {
    case Layout::kCompressedTensors:
      return {{"quant_method", "compressed-tensors"},
              {"format", "float-quantized"},
              {"ignore", {"lm_head"}},
              {"config_groups",
               {{"group_0",
                 {{"targets", {"Linear"}},
                  {"weights",
                   {{"num_bits", 8},
                    {"type", "float"},
                    {"strategy", o.per_tensor_fp8 ? "tensor" : "channel"},
                    {"symmetric", true}}},
                  {"input_activations",
                   {{"num_bits", 8}, {"type", "float"}, {"strategy", "tensor"}}}}}}}};
    case Layout::kFbgemm:
      return {{"quant_method", "fbgemm_fp8"}, {"activation_scale_ub", 1200.0}};
    case Layout::kAwq:
      return {{"quant_method", "awq"},
              {"bits", 4},
              {"group_size", o.group_size},
              {"zero_point", true},
              {"version", "gemm"}};
    case Layout::kGptq:
      return {{"quant_method", "gptq"}, {"bits", 4},    {"group_size", o.group_size},
              {"desc_act", false},      {"sym", false}, {"checkpoint_format", "gptq"}};
    case Layout::kDense:
      break;
  }
  return nullptr;
}

}  // namespace

ModelConfig fixture_config() {
  ModelConfig c;
  c.name = "quant-fixture";
  c.vocab_size = 96;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 256;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  return c;
}

void write_fixture(const std::filesystem::path& dir, const FixtureOptions& o, uint64_t seed) {
  const ModelConfig c = fixture_config();
  std::filesystem::create_directories(dir);
  WeightArena arena;
  std::vector<FixtureTensor> tensors;
  uint64_t k = 0;
  for (const ExpectedTensor& e : expected_tensors(c)) {
    const int64_t n = e.shape.size() == 2 ? e.shape[0] * e.shape[1] : e.shape[0];
    const float scale =
        e.shape.size() == 2 ? 1.0f / std::sqrt(static_cast<float>(e.shape[1])) : 0.1f;
    std::vector<uint16_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      v[i] = f32_to_bf16((e.shape.size() == 1 ? 1.0f : 0.0f) +
                         scale * test_weight_normal(seed, k, static_cast<uint64_t>(i)));
    ++k;
    if (o.layout == Layout::kDense || !is_projection(e.name)) {
      tensors.push_back(tensor(e.name, DType::kBF16, e.shape, v));
      continue;
    }
    const std::string p = e.name.substr(0, e.name.size() - 7);
    const TensorView w(v.data(), DType::kBF16, {e.shape[0], e.shape[1]});
    if (o.layout == Layout::kAwq || o.layout == Layout::kGptq)
      add_int4(tensors, p, quantize_int4(w, o.group_size, arena), e.shape[0], e.shape[1],
               o.layout == Layout::kAwq);
    else
      add_fp8(tensors, p, w, o, arena);
  }
  if (o.k_scale > 0)
    tensors.push_back(
        tensor("model.layers.0.self_attn.k_scale", DType::kF32, {}, std::vector<float>{o.k_scale}));
  if (o.v_scale > 0)
    tensors.push_back(
        tensor("model.layers.0.self_attn.v_scale", DType::kF32, {}, std::vector<float>{o.v_scale}));
  if (o.mutate_tensors) o.mutate_tensors(tensors);
  nlohmann::json config = nlohmann::json::parse(model_config_json(c));
  nlohmann::json qc = quant_config(o);
  if (o.mutate_config) o.mutate_config(qc);
  if (!qc.is_null()) config["quantization_config"] = qc;
  std::ofstream(dir / "config.json") << config.dump(2);
  std::vector<TensorDecl> decls;
  for (const FixtureTensor& t : tensors) decls.push_back({t.name, t.dtype, t.shape});
  SafetensorsWriter w(dir / "model.safetensors", decls);
  for (const FixtureTensor& t : tensors) w.write(t.name, t.bytes);
  w.finish();
}

}  // namespace ceiling::engine::testing
