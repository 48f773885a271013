// Streaming safetensors writers. The header is written first from the declared names, dtypes and
// shapes; tensor bytes are then appended in declaration order as they are produced (a tensor may
// arrive in several chunks), so a generator never holds a whole model in memory.
//
// Output follows the reference implementation: compact JSON header ("__metadata__" first when
// given, then the tensors in declaration order), padded with spaces to a multiple of 8 bytes; the
// data section holds the tensors widest element type first (stable), so every tensor is aligned
// to its element size in the file. Writes still arrive in declaration order (the writer seeks).
// Files are written to "<path>.partial" and renamed on finish(); a writer destroyed before
// finish() removes its partial files, so an interrupted run leaves no valid-looking model.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace ceiling {

struct TensorDecl {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
};

// Bytes a declared tensor occupies; throws on negative dims, overflow or partial bytes.
uint64_t tensor_decl_bytes(const TensorDecl& t);

class SafetensorsWriter {
 public:
  SafetensorsWriter(std::filesystem::path path, std::vector<TensorDecl> tensors,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Appends `bytes` to tensor `name`, which must be the first incomplete tensor in declaration
  // order (or the last one written to); throws when the name is out of order or the bytes overrun
  // the tensor. Zero-size tensors need no write (an empty write to them is accepted).
  void write(std::string_view name, std::span<const std::byte> bytes);
  template <typename T>
  void write_values(std::string_view name, std::span<const T> values) {
    write(name, std::as_bytes(values));
  }
  // Checks every tensor is complete, flushes, closes and renames into place.
  void finish();

  const std::filesystem::path& path() const { return path_; }
  uint64_t header_bytes() const { return header_bytes_; }  // 8 + padded JSON
  uint64_t data_bytes() const { return data_total_; }
  // True once every declared tensor's bytes have been written.
  bool complete() const;

 private:
  void put(const void* p, size_t n);
  size_t first_incomplete() const;

  std::filesystem::path path_, partial_;
  std::vector<TensorDecl> tensors_;
  std::vector<uint64_t> sizes_, offsets_;  // per declared tensor; offsets in the data section
  size_t current_ = 0;                     // first incomplete tensor
  uint64_t written_in_current_ = 0;
  uint64_t header_bytes_ = 0, data_total_ = 0;
  std::FILE* out_ = nullptr;
  bool finished_ = false;
};

// Splits the declared tensors, in order, into shards of at most `max_shard_bytes` of tensor data
// (a larger tensor gets a shard of its own) written as dir/<prefix>-0000k-of-0000n.safetensors,
// plus dir/<prefix>.safetensors.index.json (metadata.total_size and weight_map).
class ShardedSafetensorsWriter {
 public:
  ShardedSafetensorsWriter(std::filesystem::path dir, std::vector<TensorDecl> tensors,
                           uint64_t max_shard_bytes,
                           const std::map<std::string, std::string>& metadata = {},
                           std::string prefix = "model");
  ~ShardedSafetensorsWriter();
  void write(std::string_view name, std::span<const std::byte> bytes);
  void finish();

  const std::vector<std::filesystem::path>& shard_paths() const { return shard_paths_; }
  std::filesystem::path index_path() const;

 private:
  std::filesystem::path dir_;
  std::string prefix_;
  std::vector<std::filesystem::path> shard_paths_;
  std::vector<std::unique_ptr<SafetensorsWriter>> shards_;
  std::map<std::string, size_t, std::less<>> shard_of_;  // tensor -> shard index
  uint64_t total_bytes_ = 0;
  size_t current_ = 0;
  bool finished_ = false;
};

}  // namespace ceiling
