// config.json's quantization_config (model/quant_load.h).
#include <nlohmann/json.hpp>

#include "core/file_read.h"
#include "core/json_bounded.h"
#include "core/status.h"
#include "model/quant_load.h"

namespace ceiling {

namespace {

using json = nlohmann::json;

// Field `key` of object `o` when present and not null.
const json* field(const json& o, const char* key) {
  auto it = o.find(key);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

int int_field(const json& o, const char* key, int fallback, const std::string& where) {
  const json* v = field(o, key);
  if (!v) return fallback;
  if (!v->is_number_integer()) fail("{}: field '{}' must be an integer", where, key);
  return v->get<int>();
}

std::string string_field(const json& o, const char* key, const std::string& where) {
  const json* v = field(o, key);
  if (!v) return {};
  if (!v->is_string()) fail("{}: field '{}' must be a string", where, key);
  return v->get<std::string>();
}

void check_int4(const json& q, const std::string& where, CheckpointQuant& c) {
  const int bits = int_field(q, "bits", int_field(q, "w_bit", 0, where), where);
  if (bits != 4) fail("{}: bits {} is not supported (supported: 4)", where, bits);
  c.group_size = int_field(q, "group_size", int_field(q, "q_group_size", 0, where), where);
  if (c.group_size != 128 && c.group_size != 64)
    fail("{}: group_size {} is not supported (supported: 128, 64)", where, c.group_size);
}

void check_compressed_tensors(const json& q, const std::string& where) {
  const std::string format = string_field(q, "format", where);
  if (!format.empty() && format != "float-quantized" && format != "naive-quantized")
    fail(
        "{}: compressed-tensors format {} is not supported (supported: float-quantized, "
        "naive-quantized fp8)",
        where, quote_text(format, 64));
  const json* groups = field(q, "config_groups");
  if (!groups || !groups->is_object() || groups->empty())
    fail("{}: compressed-tensors needs a non-empty object 'config_groups'", where);
  for (const auto& [name, g] : groups->items()) {
    const std::string gw = where + ".config_groups." + name + ".weights";
    const json* w = g.is_object() ? field(g, "weights") : nullptr;
    if (!w || !w->is_object()) fail("{}: missing (every group must quantize weights)", gw);
    const int bits = int_field(*w, "num_bits", 0, gw);
    const std::string type = string_field(*w, "type", gw);
    const std::string strategy = string_field(*w, "strategy", gw);
    if (bits != 8 || type != "float" || (strategy != "channel" && strategy != "tensor"))
      fail(
          "{}: num_bits {} type {} strategy {} is not supported (supported: 8-bit float, "
          "channel or tensor)",
          gw, bits, quote_text(type, 32), quote_text(strategy, 32));
  }
}

}  // namespace

const char* quant_method_name(QuantMethod m) {
  switch (m) {
    case QuantMethod::kNone:
      return "none";
    case QuantMethod::kCompressedTensors:
      return "compressed-tensors";
    case QuantMethod::kFbgemmFp8:
      return "fbgemm_fp8";
    case QuantMethod::kAwq:
      return "awq";
    case QuantMethod::kGptq:
      return "gptq";
  }
  return "?";
}

WeightFormat CheckpointQuant::format() const {
  switch (method) {
    case QuantMethod::kCompressedTensors:
    case QuantMethod::kFbgemmFp8:
      return WeightFormat::kFp8;
    case QuantMethod::kAwq:
    case QuantMethod::kGptq:
      return WeightFormat::kInt4;
    case QuantMethod::kNone:
      break;
  }
  return WeightFormat::kDense;
}

CheckpointQuant parse_quantization_config(std::string_view text, const std::string& origin) {
  const json j = parse_json_or_fail(text, origin);
  CheckpointQuant c;
  const json* q = j.is_object() ? field(j, "quantization_config") : nullptr;
  if (!q) return c;
  const std::string where = origin + ": quantization_config";
  if (!q->is_object()) fail("{}: must be an object", where);
  const std::string method = string_field(*q, "quant_method", where);
  if (method == "compressed-tensors") {
    c.method = QuantMethod::kCompressedTensors;
    check_compressed_tensors(*q, where);
  } else if (method == "fbgemm_fp8") {
    c.method = QuantMethod::kFbgemmFp8;
  } else if (method == "awq") {
    c.method = QuantMethod::kAwq;
    check_int4(*q, where, c);
    const std::string version = string_field(*q, "version", where);
    if (!version.empty() && version != "gemm" && version != "GEMM")
      fail("{}: awq version {} is not supported (supported: gemm packing)", where,
           quote_text(version, 32));
    if (const json* zp = field(*q, "zero_point"); zp && !(zp->is_boolean() && zp->get<bool>()))
      fail("{}: awq zero_point must be true (ceiling loads asymmetric AWQ)", where);
  } else if (method == "gptq") {
    c.method = QuantMethod::kGptq;
    check_int4(*q, where, c);
    if (const json* da = field(*q, "desc_act"); da && !(da->is_boolean() && !da->get<bool>()))
      fail("{}: gptq desc_act true (act-order) is not supported (supported: desc_act false)",
           where);
    const std::string fmt = string_field(*q, "checkpoint_format", where);
    if (fmt == "gptq_v2")
      c.gptq_zero_offset = false;
    else if (!fmt.empty() && fmt != "gptq")
      fail("{}: gptq checkpoint_format {} is not supported (supported: gptq, gptq_v2)", where,
           quote_text(fmt, 32));
  } else {
    fail("{}: unsupported quant_method {} (supported: compressed-tensors, fbgemm_fp8, awq, gptq)",
         where, quote_text(method, 64));
  }
  return c;
}

}  // namespace ceiling
