// safetensors files (https://github.com/huggingface/safetensors), read through read-only memory
// maps and validated at least as strictly as the reference Rust crate:
//
//   file   := u64 little-endian N | header (N bytes, UTF-8 JSON object) | data section
//   header := { "__metadata__": {str: str}?, name: {"dtype": D, "shape": [u64...],
//                                                   "data_offsets": [begin, end]}, ... }
//
// Rules (each violation throws one-line ceiling::Error naming the file, the tensor and the rule):
// N ≤ 100,000,000 and 8 + N ≤ file size; the header is valid UTF-8 starting with '{' and parses
// as a JSON object; no name appears twice; __metadata__ maps strings to strings; every entry is
// an object with a known dtype, a shape of non-negative integers and data_offsets [begin, end]
// with begin ≤ end; numel × bits is computed with overflow checks, is whole bytes and equals
// end − begin; sorted by offset the tensors tile the data section from 0 with no gap or overlap
// and end exactly at its end (no trailing bytes). The parser reads only the span it is given.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "model/mmap_file.h"
#include "model/weights.h"

namespace ceiling {

inline constexpr uint64_t kSafetensorsMaxHeader = 100'000'000;
// model.safetensors.index.json (a 405B model's index is ~100 KB).
inline constexpr uint64_t kSafetensorsMaxIndexBytes = 64ull << 20;

// An element type the safetensors format defines. `dtype` is set when ceiling has a DType for it
// (U16/U32/U64, F8_E8M0, F4, F6_*, C64 are parsed and reported but have no TensorView type).
struct StDtype {
  std::string_view name;  // as written in files: "BF16", "F8_E4M3", ...
  int bits;
  std::optional<DType> dtype;
};
// nullptr for a name the format does not define.
const StDtype* find_st_dtype(std::string_view name);
// The file name of a ceiling DType ("BF16"); throws for types safetensors cannot store (i4).
std::string_view st_dtype_name(DType t);

struct TensorInfo {
  std::string name;
  const StDtype* st = nullptr;  // never null after parsing
  std::vector<int64_t> shape;   // outermost first; [] is a scalar
  uint64_t begin = 0, end = 0;  // byte offsets inside the data section

  uint64_t nbytes() const { return end - begin; }
  int64_t numel() const;
  std::string shape_str() const;
};

struct SafetensorsHeader {
  uint64_t data_start = 0;                             // file offset of the data section (8 + N)
  uint64_t data_size = 0;                              // bytes in the data section
  std::vector<TensorInfo> tensors;                     // sorted by data offset
  std::map<std::string, std::string> metadata;         // __metadata__
  std::map<std::string, size_t, std::less<>> by_name;  // name -> index into `tensors`

  const TensorInfo* find(std::string_view name) const;
};

// Validates the whole contents of a safetensors file held in `file`. `origin` names the file in
// error messages. Never reads outside `file`.
SafetensorsHeader parse_safetensors(std::span<const std::byte> file, const std::string& origin);

// One mapped, validated file.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);
  const std::filesystem::path& path() const { return map_.path(); }
  const SafetensorsHeader& header() const { return header_; }
  uint64_t file_size() const { return map_.size(); }
  // The tensor's bytes inside the mapping.
  std::span<const std::byte> bytes(const TensorInfo& t) const;

 private:
  MappedFile map_;
  SafetensorsHeader header_;
};

// model.safetensors.index.json: tensor name -> shard file name.
struct SafetensorsIndex {
  std::map<std::string, std::string> weight_map;
  std::optional<uint64_t> total_size;  // metadata.total_size when present (informational)
};
// Parses and checks the index text: JSON object, "weight_map" an object of strings, no tensor
// listed twice, every shard a plain file name (no '/', '\\', NUL, "." or ".."; not empty).
SafetensorsIndex parse_safetensors_index(std::string_view text, const std::string& origin);

// The open, validated weight files of one model (a single file or the shards of an index).
// Immutable after opening; safe to share between threads.
class SafetensorsSet {
 public:
  struct Entry {
    const SafetensorsFile* file;
    const TensorInfo* info;
    const std::byte* data;  // aligned to the element size (copied when the file's is not)
  };

  // dir/model.safetensors when it exists, else dir/model.safetensors.index.json and its shards.
  // Weight files must resolve inside `dir` (symlinks included; a Hugging Face cache snapshot may
  // link into its sibling blobs/ folder). Reports bytes mapped through `progress`.
  static std::shared_ptr<const SafetensorsSet> open_dir(const std::filesystem::path& dir,
                                                        const ProgressFn& progress = {});
  // One safetensors file.
  static std::shared_ptr<const SafetensorsSet> open_file(const std::filesystem::path& file);

  const Entry* find(std::string_view name) const;
  // A view of tensor `name` (host memory, contiguous). Throws naming the file and the tensor when
  // it is absent, has no ceiling DType, or has more than kMaxDims dimensions.
  TensorView view(std::string_view name) const;
  std::span<const std::byte> bytes(std::string_view name) const;

  const std::map<std::string, Entry, std::less<>>& tensors() const { return tensors_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  uint64_t file_bytes() const;  // sum of file sizes
  std::optional<uint64_t> index_total_size() const { return index_total_size_; }
  const std::filesystem::path& origin() const { return origin_; }  // the file or the index

 private:
  SafetensorsSet() = default;
  void add_file(std::unique_ptr<SafetensorsFile> f,
                const std::map<std::string, std::string>* index);

  std::filesystem::path origin_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Entry, std::less<>> tensors_;
  std::vector<std::unique_ptr<std::byte[]>> realigned_;  // copies of misaligned tensors
  std::optional<uint64_t> index_total_size_;
};

// Quotes a name for an error message: printable ASCII kept, the rest escaped, long names cut.
std::string quote_name(std::string_view name);

}  // namespace ceiling
