#include "model/safetensors.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/file_read.h"
#include "core/json_bounded.h"
#include "core/status.h"

namespace ceiling {

namespace {

using nlohmann::json;

constexpr StDtype kStDtypes[] = {
    {"BOOL", 8, DType::kBool},      {"U8", 8, DType::kU8},          {"I8", 8, DType::kI8},
    {"F8_E5M2", 8, DType::kF8E5M2}, {"F8_E4M3", 8, DType::kF8E4M3}, {"F8_E8M0", 8, std::nullopt},
    {"I16", 16, DType::kI16},       {"U16", 16, std::nullopt},      {"F16", 16, DType::kF16},
    {"BF16", 16, DType::kBF16},     {"I32", 32, DType::kI32},       {"U32", 32, std::nullopt},
    {"F32", 32, DType::kF32},       {"F64", 64, DType::kF64},       {"I64", 64, DType::kI64},
    {"U64", 64, std::nullopt},      {"C64", 64, std::nullopt},      {"F4", 4, std::nullopt},
    {"F6_E2M3", 6, std::nullopt},   {"F6_E3M2", 6, std::nullopt},
};

// Returns the offset of the first byte that breaks UTF-8 (overlong forms, surrogates and code
// points past U+10FFFF are invalid, as in Rust's str::from_utf8), or npos when it is valid.
size_t find_invalid_utf8(std::span<const std::byte> s) {
  size_t i = 0;
  const size_t n = s.size();
  auto at = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  while (i < n) {
    const uint8_t c = at(i);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint8_t lo = 0x80, hi = 0xbf;  // allowed range of the second byte
    if (c >= 0xc2 && c <= 0xdf)
      len = 2;
    else if (c == 0xe0)
      len = 3, lo = 0xa0;
    else if (c >= 0xe1 && c <= 0xef)
      len = 3, hi = (c == 0xed ? 0x9f : 0xbf);
    else if (c == 0xf0)
      len = 4, lo = 0x90;
    else if (c >= 0xf1 && c <= 0xf3)
      len = 4;
    else if (c == 0xf4)
      len = 4, hi = 0x8f;
    else
      return i;
    if (n - i < static_cast<size_t>(len)) return i;
    if (at(i + 1) < lo || at(i + 1) > hi) return i;
    for (int k = 2; k < len; ++k)
      if ((at(i + k) & 0xc0) != 0x80) return i;
    i += static_cast<size_t>(len);
  }
  return std::string_view::npos;
}

// Parses the header text; rejects duplicate keys at any depth like serde rejects duplicate fields.
// A valid header nests three deep (header object, entry object, shape list).
constexpr JsonLimits kHeaderJsonLimits{.max_depth = 8};

json parse_header_json(std::string_view text, const std::string& origin) {
  BoundedJson r = parse_json_bounded(text, kHeaderJsonLimits);
  if (r.error) fail("{}: header is not valid JSON ({})", origin, *r.error);
  if (!r.value.is_object()) fail("{}: header is not a JSON object", origin);
  const auto& d = r.duplicate_path;
  if (d.size() == 1)
    fail("{}: tensor {} appears twice in the header (duplicate tensor)", origin, quote_name(d[0]));
  if (d.size() > 1)
    fail("{}: {} {}: key {} appears twice (duplicate key)", origin,
         d[0] == "__metadata__" ? "" : "tensor", quote_name(d[0]), quote_name(d.back()));
  return std::move(r.value);
}

uint64_t get_u64(const json& v) {
  return v.get<uint64_t>();
}

}  // namespace

std::string quote_name(std::string_view name) {
  return quote_text(name, 160);
}

const StDtype* find_st_dtype(std::string_view name) {
  for (const auto& d : kStDtypes)
    if (d.name == name) return &d;
  return nullptr;
}

std::string_view st_dtype_name(DType t) {
  for (const auto& d : kStDtypes)
    if (d.dtype == t) return d.name;
  fail("dtype {} cannot be stored in a safetensors file", dtype_name(t));
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // bounded: checked when parsed
  return n;
}

std::string TensorInfo::shape_str() const {
  std::string r = "[";
  for (size_t i = 0; i < shape.size(); ++i) r += (i ? ", " : "") + std::to_string(shape[i]);
  return r + "]";
}

const TensorInfo* SafetensorsHeader::find(std::string_view name) const {
  auto it = by_name.find(name);
  return it == by_name.end() ? nullptr : &tensors[it->second];
}

namespace {

TensorInfo parse_entry(const std::string& name, const json& e, const std::string& origin) {
  const std::string where = fmt::format("{}: tensor {}", origin, quote_name(name));
  if (!e.is_object()) fail("{}: entry must be an object with dtype, shape, data_offsets", where);
  TensorInfo t;
  t.name = name;
  auto dt = e.find("dtype");
  if (dt == e.end()) fail("{}: missing 'dtype'", where);
  if (!dt->is_string()) fail("{}: 'dtype' must be a string", where);
  t.st = find_st_dtype(dt->get_ref<const std::string&>());
  if (t.st == nullptr)
    fail("{}: unknown dtype {}", where, quote_name(dt->get_ref<const std::string&>()));

  auto sh = e.find("shape");
  if (sh == e.end()) fail("{}: missing 'shape'", where);
  if (!sh->is_array()) fail("{}: 'shape' must be a list of non-negative integers", where);
  for (const auto& d : *sh) {
    if (!d.is_number_unsigned())
      fail("{}: shape must hold non-negative integers, found a {} (bad shape)", where,
           d.is_number_integer() ? "negative integer" : d.type_name());
    const uint64_t v = get_u64(d);
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail("{}: shape dimension {} is too large", where, v);
    t.shape.push_back(static_cast<int64_t>(v));
  }

  auto off = e.find("data_offsets");
  if (off == e.end()) fail("{}: missing 'data_offsets'", where);
  if (!off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned())
    fail("{}: 'data_offsets' must be [begin, end] with non-negative integers", where);
  t.begin = get_u64((*off)[0]);
  t.end = get_u64((*off)[1]);
  if (t.end < t.begin)
    fail("{}: data_offsets [{}, {}] end before they begin", where, t.begin, t.end);

  // numel × bits with overflow checks, then whole bytes.
  uint64_t numel = 1;
  for (int64_t d : t.shape)
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel))
      fail("{}: shape {} overflows 64 bits", where, t.shape_str());
  uint64_t bits = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(t.st->bits), &bits) ||
      numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    fail("{}: shape {} of {} overflows 64 bits", where, t.shape_str(), t.st->name);
  if (bits % 8 != 0)
    fail("{}: shape {} of {} is not a whole number of bytes", where, t.shape_str(), t.st->name);
  if (bits / 8 != t.nbytes())
    fail("{}: shape {} of {} needs {} bytes but data_offsets [{}, {}] hold {} (size mismatch)",
         where, t.shape_str(), t.st->name, bits / 8, t.begin, t.end, t.nbytes());
  return t;
}

}  // namespace

SafetensorsHeader parse_safetensors(std::span<const std::byte> file, const std::string& origin) {
  if (file.size() < 8)
    fail("{}: file is {} bytes, shorter than the 8-byte header length (truncated file)", origin,
         file.size());
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(file[static_cast<size_t>(i)]);
  if (n > kSafetensorsMaxHeader)
    fail("{}: header length {} exceeds the limit of {} bytes (header too large)", origin, n,
         kSafetensorsMaxHeader);
  if (n > file.size() - 8)
    fail("{}: header length {} runs past the end of the file ({} bytes; header past EOF)", origin,
         n, file.size());
  const auto header = file.subspan(8, static_cast<size_t>(n));
  if (size_t bad = find_invalid_utf8(header); bad != std::string_view::npos)
    fail("{}: header is not valid UTF-8 (byte {} of the header)", origin, bad);
  const std::string_view text(reinterpret_cast<const char*>(header.data()), header.size());
  if (text.empty() || text.front() != '{')
    fail("{}: header is not a JSON object (must start with '{{')", origin);
  const json j = parse_header_json(text, origin);

  SafetensorsHeader h;
  h.data_start = 8 + n;
  h.data_size = file.size() - h.data_start;
  for (const auto& [name, e] : j.items()) {
    if (name == "__metadata__") {
      if (e.is_null()) continue;
      if (!e.is_object())
        fail("{}: __metadata__ must be an object mapping strings to strings", origin);
      for (const auto& [k, v] : e.items()) {
        if (!v.is_string())
          fail(
              "{}: __metadata__ value of {} must be a string (__metadata__ maps strings to "
              "strings)",
              origin, quote_name(k));
        h.metadata.emplace(k, v.get<std::string>());
      }
      continue;
    }
    h.tensors.push_back(parse_entry(name, e, origin));
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  // Sorted by offset, the tensors must tile [0, data_size) exactly.
  uint64_t expected = 0;
  const TensorInfo* prev = nullptr;
  for (const auto& t : h.tensors) {
    const std::string where = fmt::format("{}: tensor {}", origin, quote_name(t.name));
    if (t.begin < expected)
      fail("{}: data_offsets [{}, {}] overlap tensor {} which ends at {} (overlapping offsets)",
           where, t.begin, t.end, quote_name(prev->name), expected);
    if (t.begin > expected)
      fail("{}: data_offsets [{}, {}] leave a gap of {} bytes after {} (gap between tensors)",
           where, t.begin, t.end, t.begin - expected,
           prev ? "tensor " + quote_name(prev->name) : std::string("the start of the data"));
    if (t.end > h.data_size)
      fail(
          "{}: data_offsets [{}, {}] run past the end of the data section ({} bytes; truncated "
          "file)",
          where, t.begin, t.end, h.data_size);
    expected = t.end;
    prev = &t;
  }
  if (expected != h.data_size)
    fail("{}: {} trailing bytes after the last tensor (data section {} bytes, tensors cover {})",
         origin, h.data_size - expected, h.data_size, expected);
  for (size_t i = 0; i < h.tensors.size(); ++i) h.by_name.emplace(h.tensors[i].name, i);
  return h;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path)
    : map_(path), header_(parse_safetensors(map_.bytes(), path.string())) {}

std::span<const std::byte> SafetensorsFile::bytes(const TensorInfo& t) const {
  return map_.bytes().subspan(static_cast<size_t>(header_.data_start + t.begin),
                              static_cast<size_t>(t.nbytes()));
}

}  // namespace ceiling
