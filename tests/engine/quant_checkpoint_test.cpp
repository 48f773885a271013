// Quantized checkpoints in each real layout (quant_fixtures.h) load into the same QuantLinear as
// the dense checkpoint quantized on load, run the same forward bit for bit, and every malformed
// variant is one error naming the tensor and the rule. Known packed words pin the nibble orders.
#include <gtest/gtest.h>

#include <cstring>

#include "../model/model_test_util.h"
#include "core/status.h"
#include "engine/cpu_ops.h"
#include "engine/forward.h"
#include "model/quant_load.h"
#include "model/safetensors.h"
#include "quant_fixtures.h"

namespace ceiling::engine {
namespace {

using test::TempDir;
using testing::FixtureOptions;
using testing::FixtureTensor;
using testing::Layout;
using testing::write_fixture;

bool same_bytes(const TensorView& a, const TensorView& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.nbytes() == b.nbytes() &&
         std::memcmp(a.data, b.data, a.nbytes()) == 0;
}

// Logits of every position of a short prompt.
std::vector<float> logits_of(const Model& m, bool fp8_kv = false) {
  CpuOpsOptions o;
  o.n_threads = 1;
  o.fp8_kv_cache = fp8_kv;
  CpuOps ops(o);
  ops.upload(m.config, m.weights);
  Forward f(ops, ForwardLimits{16, 16});
  KvCache kv = ops.alloc_kv_cache(2, 16);
  StepBatch s;
  s.max_blocks = 2;
  append_sequence(s, {1, 5, 9, 33, 17, 60, 2, 44, 90, 3}, 0, {0, 1}, 16, false);
  for (int t = 0; t < s.num_tokens(); ++t) s.logits_rows.push_back(t);
  const TensorView l = f.run(s, kv);
  std::vector<float> out(static_cast<size_t>(l.numel()));
  ops.to_host(l, out.data());
  return out;
}

struct LayoutCase {
  const char* name;
  Layout layout;
  const char* on_load;  // the --quantization it must equal
  bool per_tensor = false;
};

class CheckpointLayout : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(CheckpointLayout, LoadsAsTheDenseModelQuantizedOnLoad) {
  const LayoutCase& c = GetParam();
  TempDir dense, quant;
  write_fixture(dense.path(), {});
  FixtureOptions o;
  o.layout = c.layout;
  o.per_tensor_fp8 = c.per_tensor;
  o.k_scale = 0.5f;
  o.v_scale = 2.0f;
  write_fixture(quant.path(), o);
  LoadOptions lo;
  lo.quantization = c.on_load;
  lo.int4_group_size = 64;
  const Model want = load_model(dense.path(), {}, lo);
  const Model got = load_model(quant.path());
  EXPECT_TRUE(got.unexpected_tensors.empty()) << got.unexpected_tensors.front();
  EXPECT_EQ(got.weights.layers[0].k_scale, 0.5f);
  EXPECT_EQ(got.weights.layers[0].v_scale, 2.0f);
  EXPECT_EQ(got.weights.layers[1].k_scale, 1.0f);
  for (size_t l = 0; l < want.weights.layers.size(); ++l)
    for (int p = 0; p < kNumProj; ++p) {
      SCOPED_TRACE(fmt::format("layer {} {}", l, proj_name(static_cast<Proj>(p))));
      const QuantLinear& a = got.weights.layers[l].quant[p];
      const QuantLinear& b = want.weights.layers[l].quant[p];
      ASSERT_EQ(a.format, b.format);
      EXPECT_EQ(a.group_size, b.group_size);
      EXPECT_EQ(got.weights.layers[l].dense(static_cast<Proj>(p)).data, nullptr);
      if (!c.per_tensor) {  // per tensor: other codes and one scale (PerTensorScale... below)
        EXPECT_TRUE(same_bytes(a.qweight, b.qweight));
        EXPECT_TRUE(same_bytes(a.scale, b.scale));
        if (a.format == WeightFormat::kInt4) {
          EXPECT_TRUE(same_bytes(a.zero, b.zero));
        }
      }
      if (c.layout == Layout::kCompressedTensors) {
        EXPECT_EQ(a.input_scale, 0.25f);
      }
    }
  if (!c.per_tensor) {
    EXPECT_EQ(logits_of(got), logits_of(want));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Quant, CheckpointLayout,
    ::testing::Values(LayoutCase{"compressed_tensors", Layout::kCompressedTensors, "fp8"},
                      LayoutCase{"compressed_tensors_per_tensor", Layout::kCompressedTensors, "fp8",
                                 true},
                      LayoutCase{"fbgemm_fp8", Layout::kFbgemm, "fp8"},
                      LayoutCase{"awq", Layout::kAwq, "int4"},
                      LayoutCase{"gptq", Layout::kGptq, "int4"}),
    [](const ::testing::TestParamInfo<LayoutCase>& i) { return std::string(i.param.name); });

TEST(CheckpointLayout, PerTensorScaleRepeatsOneScale) {
  TempDir d;
  FixtureOptions o;
  o.layout = Layout::kCompressedTensors;
  o.per_tensor_fp8 = true;
  write_fixture(d.path(), o);
  const Model m = load_model(d.path());
  const QuantLinear& q = m.weights.layers[0].quant[kQProj];
  for (int64_t n = 1; n < q.scale.numel(); ++n)
    EXPECT_EQ(q.scale.as<float>()[n], q.scale.as<float>()[0]);
}

// ---- known words: the nibble orders of the formats, not of ceiling's own packer -------------

// One projection "x" of W [8, 64] in its own file, bound into `arena`.
QuantLinear bind_one(const std::vector<FixtureTensor>& ts, const CheckpointQuant& qc,
                     WeightArena& arena) {
  TempDir d;
  std::vector<TensorDecl> decls;
  for (const auto& t : ts) decls.push_back({t.name, t.dtype, t.shape});
  SafetensorsWriter w(d / "x.safetensors", decls);
  for (const auto& t : ts) w.write(t.name, t.bytes);
  w.finish();
  auto files = SafetensorsSet::open_file(d / "x.safetensors");
  std::vector<std::string> used;
  return bind_quant_linear(*files, "x", 8, 64, qc, arena, used);
}

template <typename T>
FixtureTensor raw(std::string name, DType dt, std::vector<int64_t> shape, std::vector<T> v) {
  FixtureTensor t{std::move(name), dt, std::move(shape), {}};
  t.bytes.resize(v.size() * sizeof(T));
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

TEST(PackedWords, AwqNibbleOrderIs02461357) {
  // AutoAWQ packs columns 8j + [0, 2, 4, 6, 1, 3, 5, 7][i] into nibble i: columns valued 0..7
  // give 0x75316420.
  CheckpointQuant qc;
  qc.method = QuantMethod::kAwq;
  qc.group_size = 64;
  WeightArena arena;
  const QuantLinear q =
      bind_one({raw("x.qweight", DType::kI32, {64, 1}, std::vector<int32_t>(64, 0x75316420)),
                raw("x.qzeros", DType::kI32, {1, 1}, std::vector<int32_t>{0x75316420}),
                raw("x.scales", DType::kF16, {1, 8}, std::vector<uint16_t>(8, f32_to_f16(1.0f)))},
               qc, arena);
  for (int n = 0; n < 8; ++n) {
    EXPECT_EQ(q.qweight.as<uint8_t>()[n * 64 + 5], n);
    EXPECT_EQ(q.zero.as<uint8_t>()[n], n);
  }
}

TEST(PackedWords, GptqPacksInputsInOrderAndStoresZeroMinusOne) {
  // GPTQ: qweight [K/8, N], input 8r + i in nibble i; qzeros along N; v1 stores zero − 1.
  CheckpointQuant qc;
  qc.method = QuantMethod::kGptq;
  qc.group_size = 64;
  WeightArena arena;
  const QuantLinear q =
      bind_one({raw("x.qweight", DType::kI32, {8, 8}, std::vector<int32_t>(64, 0x76543210)),
                raw("x.qzeros", DType::kI32, {1, 1},
                    std::vector<int32_t>{static_cast<int32_t>(0xf6543217u)}),
                raw("x.scales", DType::kF16, {1, 8}, std::vector<uint16_t>(8, f32_to_f16(1.0f)))},
               qc, arena);
  for (int k = 0; k < 64; ++k) EXPECT_EQ(q.qweight.as<uint8_t>()[3 * 64 + k], k % 8);
  const int want_zero[8] = {8, 2, 3, 4, 5, 6, 7, 0};  // stored 7, 1, ..., 6, 15 (= −1)
  for (int n = 0; n < 8; ++n) EXPECT_EQ(q.zero.as<uint8_t>()[n], want_zero[n]);
}

// ---- malformed checkpoints: one error naming the tensor and the rule -------------------------

struct Malformed {
  const char* name;
  Layout layout;
  std::function<void(std::vector<FixtureTensor>&)> tensors;
  std::function<void(nlohmann::json&)> config;
  const char* expect1;
  const char* expect2;
};

void drop(std::vector<FixtureTensor>& ts, const std::string& name) {
  std::erase_if(ts, [&](const FixtureTensor& t) { return t.name == name; });
}
FixtureTensor& find(std::vector<FixtureTensor>& ts, const std::string& name) {
  for (auto& t : ts)
    if (t.name == name) return t;
  throw std::runtime_error("no " + name);
}
const std::string kQ = "model.layers.1.self_attn.q_proj";

std::vector<Malformed> malformed_cases() {
  std::vector<Malformed> m;
  m.push_back({"fp8_missing_scale",
               Layout::kCompressedTensors,
               [](auto& ts) { drop(ts, kQ + ".weight_scale"); },
               {},
               "q_proj.weight_scale",
               "needs its scale"});
  m.push_back({"fp8_scale_wrong_shape",
               Layout::kFbgemm,
               [](auto& ts) {
                 auto& t = find(ts, kQ + ".weight_scale");
                 t.shape = {32, 2};
               },
               {},
               "q_proj.weight_scale",
               "[N, 1] per channel"});
  m.push_back({"fp8_negative_scale",
               Layout::kCompressedTensors,
               [](auto& ts) {
                 const float v = -1.0f;
                 std::memcpy(find(ts, kQ + ".weight_scale").bytes.data(), &v, 4);
               },
               {},
               "q_proj.weight_scale",
               "finite and non-negative"});
  m.push_back({"awq_wrong_packing",
               Layout::kAwq,
               [](auto& ts) {
                 auto& t = find(ts, kQ + ".qweight");
                 t.shape = {t.shape[1], t.shape[0]};
               },
               {},
               "q_proj.qweight",
               "AWQ qweight is [K, N / 8]"});
  m.push_back({"awq_missing_zeros",
               Layout::kAwq,
               [](auto& ts) { drop(ts, kQ + ".qzeros"); },
               {},
               "q_proj.qzeros",
               "zero points"});
  m.push_back({"gptq_float_qweight",
               Layout::kGptq,
               [](auto& ts) { find(ts, kQ + ".qweight").dtype = DType::kF32; },
               {},
               "q_proj.qweight",
               "int32"});
  m.push_back({"gptq_scales_wrong_shape",
               Layout::kGptq,
               [](auto& ts) {
                 auto& t = find(ts, kQ + ".scales");
                 t.shape = {t.shape[1], t.shape[0]};
               },
               {},
               "q_proj.scales",
               "[K / group_size, N]"});
  m.push_back({"gptq_act_order_g_idx",
               Layout::kGptq,
               [](auto& ts) {
                 const int32_t one = 1;
                 std::memcpy(find(ts, kQ + ".g_idx").bytes.data(), &one, 4);
               },
               {},
               "q_proj.g_idx",
               "desc_act false"});
  m.push_back({"gptq_group_does_not_divide_k",
               Layout::kGptq,
               {},
               [](auto& q) { q["group_size"] = 128; },
               "q_proj",
               "group_size 128 does not divide K"});
  m.push_back({"gptq_desc_act",
               Layout::kGptq,
               {},
               [](auto& q) { q["desc_act"] = true; },
               "quantization_config",
               "desc_act true"});
  m.push_back({"awq_gemv_version",
               Layout::kAwq,
               {},
               [](auto& q) { q["version"] = "gemv"; },
               "quantization_config",
               "gemm packing"});
  m.push_back({"int4_bits_8",
               Layout::kAwq,
               {},
               [](auto& q) { q["bits"] = 8; },
               "quantization_config",
               "bits 8 is not supported"});
  m.push_back({"group_size_32",
               Layout::kGptq,
               {},
               [](auto& q) { q["group_size"] = 32; },
               "quantization_config",
               "group_size 32 is not supported"});
  m.push_back({"unsupported_method",
               Layout::kAwq,
               {},
               [](auto& q) { q["quant_method"] = "bitsandbytes"; },
               "quantization_config",
               "unsupported quant_method 'bitsandbytes'"});
  m.push_back({"compressed_tensors_int_pack",
               Layout::kCompressedTensors,
               {},
               [](auto& q) { q["format"] = "pack-quantized"; },
               "quantization_config",
               "format 'pack-quantized' is not supported"});
  m.push_back({"compressed_tensors_int_weights",
               Layout::kCompressedTensors,
               {},
               [](auto& q) { q["config_groups"]["group_0"]["weights"]["num_bits"] = 4; },
               "config_groups.group_0.weights",
               "num_bits 4"});
  m.push_back({"kv_scale_zero",
               Layout::kCompressedTensors,
               [](auto& ts) {
                 std::memset(find(ts, "model.layers.0.self_attn.k_scale").bytes.data(), 0, 4);
               },
               {},
               "self_attn.k_scale",
               "positive and finite"});
  return m;
}

TEST(MalformedCheckpoint, EachIsOneNamedError) {
  for (const Malformed& c : malformed_cases()) {
    SCOPED_TRACE(c.name);
    TempDir d;
    FixtureOptions o;
    o.layout = c.layout;
    o.k_scale = 0.5f;
    o.mutate_tensors = c.tensors;
    o.mutate_config = c.config;
    write_fixture(d.path(), o);
    try {
      load_model(d.path());
      ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(c.expect1), std::string::npos) << msg;
      EXPECT_NE(msg.find(c.expect2), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
}

TEST(MalformedCheckpoint, QuantizationFlagMustMatchTheCheckpoint) {
  TempDir awq, dense;
  FixtureOptions o;
  o.layout = Layout::kAwq;
  write_fixture(awq.path(), o);
  write_fixture(dense.path(), {});
  LoadOptions lo;
  lo.quantization = "fp8";
  EXPECT_THROW(load_model(awq.path(), {}, lo), Error);
  lo.quantization = "gptq";
  EXPECT_THROW(load_model(awq.path(), {}, lo), Error);
  lo.quantization = "awq";
  EXPECT_NO_THROW(load_model(awq.path(), {}, lo));
  EXPECT_THROW(load_model(dense.path(), {}, lo), Error);  // awq needs an AWQ checkpoint
  lo.quantization = "nf4";
  EXPECT_THROW(load_model(dense.path(), {}, lo), Error);
}

}  // namespace
}  // namespace ceiling::engine
