#include "model/safetensors_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/status.h"
#include "model/safetensors.h"

namespace ceiling {

namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;

uint64_t tensor_decl_bytes(const TensorDecl& t) {
  const uint64_t bits_per = static_cast<uint64_t>(dtype_bits(t.dtype));
  uint64_t numel = 1;
  for (int64_t d : t.shape) {
    if (d < 0) fail("tensor {}: negative dimension {}", quote_name(t.name), d);
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel))
      fail("tensor {}: shape overflows 64 bits", quote_name(t.name));
  }
  uint64_t bits = 0;
  if (__builtin_mul_overflow(numel, bits_per, &bits))
    fail("tensor {}: size overflows 64 bits", quote_name(t.name));
  if (bits % 8 != 0) fail("tensor {}: not a whole number of bytes", quote_name(t.name));
  return bits / 8;
}

SafetensorsWriter::SafetensorsWriter(fs::path path, std::vector<TensorDecl> tensors,
                                     const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)), tensors_(std::move(tensors)) {
  partial_ = path_;
  partial_ += ".partial";
  ordered_json h = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json md = ordered_json::object();
    for (const auto& [k, v] : metadata) md[k] = v;
    h["__metadata__"] = md;
  }
  std::set<std::string_view> names;
  for (const auto& t : tensors_) {
    if (t.name == "__metadata__") fail("{}: '__metadata__' is not a tensor name", path_.string());
    if (!names.insert(t.name).second)
      fail("{}: tensor {} declared twice", path_.string(), quote_name(t.name));
    (void)st_dtype_name(t.dtype);  // throws for types the format cannot store
    sizes_.push_back(tensor_decl_bytes(t));
  }
  // Data layout: widest elements first (stable), so each tensor is aligned to its element size.
  std::vector<size_t> order(tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return dtype_bits(tensors_[a].dtype) > dtype_bits(tensors_[b].dtype);
  });
  offsets_.resize(tensors_.size());
  for (size_t i : order) {
    offsets_[i] = data_total_;
    data_total_ += sizes_[i];
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const TensorDecl& t = tensors_[i];
    h[t.name] = {{"dtype", st_dtype_name(t.dtype)},
                 {"shape", t.shape},
                 {"data_offsets", {offsets_[i], offsets_[i] + sizes_[i]}}};
  }
  std::string text;
  try {
    text = h.dump();
  } catch (const nlohmann::json::exception& e) {
    fail("{}: cannot encode header (tensor names must be UTF-8): {}", path_.string(), e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  header_bytes_ = 8 + text.size();

  out_ = std::fopen(partial_.c_str(), "wb");
  if (out_ == nullptr) fail("{}: cannot create: {}", partial_.string(), std::strerror(errno));
  const uint64_t n = text.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  put(len, 8);
  put(text.data(), text.size());
}

SafetensorsWriter::~SafetensorsWriter() {
  if (out_ != nullptr) std::fclose(out_);
  if (!finished_) {
    std::error_code ec;
    fs::remove(partial_, ec);
  }
}

void SafetensorsWriter::put(const void* p, size_t n) {
  if (n != 0 && std::fwrite(p, 1, n, out_) != n)
    fail("{}: write failed: {}", partial_.string(), std::strerror(errno));
}

bool SafetensorsWriter::complete() const {
  return first_incomplete() == tensors_.size();
}

size_t SafetensorsWriter::first_incomplete() const {
  size_t i = current_;
  if (i < tensors_.size() && written_in_current_ == sizes_[i]) ++i;
  while (i < tensors_.size() && sizes_[i] == 0) ++i;
  return i;
}

void SafetensorsWriter::write(std::string_view name, std::span<const std::byte> bytes) {
  if (finished_ || out_ == nullptr) fail("{}: write after finish", path_.string());
  // Move on from a complete tensor unless this call names it (an empty write to it is allowed).
  while (current_ < tensors_.size() && written_in_current_ == sizes_[current_] &&
         tensors_[current_].name != name) {
    ++current_;
    written_in_current_ = 0;
  }
  if (current_ == tensors_.size())
    fail("{}: tensor {} written after all tensors were complete", path_.string(), quote_name(name));
  const TensorDecl& t = tensors_[current_];
  if (t.name != name)
    fail("{}: tensor {} written out of order (expected {})", path_.string(), quote_name(name),
         quote_name(t.name));
  if (bytes.size() > sizes_[current_] - written_in_current_)
    fail("{}: tensor {}: {} bytes overrun its size {} ({} already written)", path_.string(),
         quote_name(name), bytes.size(), sizes_[current_], written_in_current_);
  if (written_in_current_ == 0 && !bytes.empty() &&
      std::fseek(out_, static_cast<long>(header_bytes_ + offsets_[current_]), SEEK_SET) != 0)
    fail("{}: seek failed: {}", partial_.string(), std::strerror(errno));
  put(bytes.data(), bytes.size());
  written_in_current_ += bytes.size();
}

void SafetensorsWriter::finish() {
  if (finished_) return;
  if (const size_t i = first_incomplete(); i != tensors_.size())
    fail("{}: tensor {} incomplete ({} of {} bytes written)", path_.string(),
         quote_name(tensors_[i].name), i == current_ ? written_in_current_ : 0, sizes_[i]);
  const bool flushed = std::fflush(out_) == 0;
  const bool closed = std::fclose(out_) == 0;
  out_ = nullptr;
  if (!flushed || !closed) fail("{}: write failed: {}", partial_.string(), std::strerror(errno));
  std::error_code ec;
  fs::rename(partial_, path_, ec);
  if (ec) fail("{}: cannot rename into place: {}", path_.string(), ec.message());
  finished_ = true;
}

// ---------------------------------------------------------------------------------------------

ShardedSafetensorsWriter::ShardedSafetensorsWriter(
    fs::path dir, std::vector<TensorDecl> tensors, uint64_t max_shard_bytes,
    const std::map<std::string, std::string>& metadata, std::string prefix)
    : dir_(std::move(dir)), prefix_(std::move(prefix)) {
  if (max_shard_bytes == 0) fail("{}: shard size must be positive", dir_.string());
  std::vector<std::vector<TensorDecl>> groups;
  uint64_t in_group = 0;
  for (auto& t : tensors) {
    const uint64_t n = tensor_decl_bytes(t);
    if (groups.empty() || (in_group > 0 && in_group + n > max_shard_bytes)) {
      groups.emplace_back();
      in_group = 0;
    }
    if (!shard_of_.emplace(t.name, groups.size() - 1).second)
      fail("{}: tensor {} declared twice", dir_.string(), quote_name(t.name));
    in_group += n;
    total_bytes_ += n;
    groups.back().push_back(std::move(t));
  }
  if (groups.empty()) groups.emplace_back();
  for (size_t i = 0; i < groups.size(); ++i) {
    shard_paths_.push_back(
        dir_ / fmt::format("{}-{:05d}-of-{:05d}.safetensors", prefix_, i + 1, groups.size()));
    shards_.push_back(
        std::make_unique<SafetensorsWriter>(shard_paths_.back(), std::move(groups[i]), metadata));
  }
}

ShardedSafetensorsWriter::~ShardedSafetensorsWriter() = default;

fs::path ShardedSafetensorsWriter::index_path() const {
  return dir_ / (prefix_ + ".safetensors.index.json");
}

void ShardedSafetensorsWriter::write(std::string_view name, std::span<const std::byte> bytes) {
  auto it = shard_of_.find(name);
  if (it == shard_of_.end())
    fail("{}: tensor {} was not declared", dir_.string(), quote_name(name));
  while (current_ < shards_.size() && shards_[current_]->complete()) ++current_;
  if (it->second != current_)
    fail("{}: tensor {} written out of order", dir_.string(), quote_name(name));
  shards_[current_]->write(name, bytes);
}

void ShardedSafetensorsWriter::finish() {
  if (finished_) return;
  for (auto& s : shards_) s->finish();
  ordered_json idx;
  idx["metadata"] = {{"total_size", total_bytes_}};
  ordered_json wm = ordered_json::object();
  for (const auto& [name, shard] : shard_of_) wm[name] = shard_paths_[shard].filename().string();
  idx["weight_map"] = wm;
  const fs::path p = index_path();
  fs::path partial = p;
  partial += ".partial";
  std::FILE* f = std::fopen(partial.c_str(), "wb");
  if (f == nullptr) fail("{}: cannot create: {}", partial.string(), std::strerror(errno));
  const std::string text = idx.dump(2) + "\n";
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) fail("{}: write failed", partial.string());
  std::error_code ec;
  fs::rename(partial, p, ec);
  if (ec) fail("{}: cannot rename into place: {}", p.string(), ec.message());
  finished_ = true;
}

}  // namespace ceiling
