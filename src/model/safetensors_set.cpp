// SafetensorsSet: the weight files of one model directory (single file or index + shards), and
// the index parser. The containment rules keep a hostile index from reading outside the model.
#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/file_read.h"
#include "core/json_bounded.h"
#include "core/status.h"
#include "model/safetensors.h"

namespace ceiling {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

bool plain_file_name(std::string_view s) {
  if (s.empty() || s == "." || s == "..") return false;
  return s.find_first_of(std::string_view("/\\\0", 3)) == std::string_view::npos;
}

// An index nests three deep (object, weight_map / metadata, nothing below).
constexpr JsonLimits kIndexJsonLimits{.max_depth = 8};

fs::path resolve_inside(const fs::path& dir, const std::string& name, const std::string& what) {
  return contained_file(dir, name, what);
}

bool present(const fs::path& p) {
  return dir_entry_present(p.parent_path(), p.filename().string());
}

}  // namespace

SafetensorsIndex parse_safetensors_index(std::string_view text, const std::string& origin) {
  BoundedJson r = parse_json_bounded(text, kIndexJsonLimits);
  if (r.error) fail("{}: not valid JSON ({})", origin, *r.error);
  const json& j = r.value;
  if (!j.is_object()) fail("{}: index must be a JSON object", origin);
  const auto& d = r.duplicate_path;
  if (d.size() == 2 && d[0] == "weight_map")
    fail("{}: tensor {} is listed twice in weight_map (a tensor may live in one shard only)",
         origin, quote_name(d[1]));
  if (!d.empty()) fail("{}: key {} appears twice", origin, quote_name(d.back()));
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object())
    fail("{}: 'weight_map' is missing or not an object", origin);
  SafetensorsIndex idx;
  for (const auto& [name, shard] : wm->items()) {
    if (!shard.is_string())
      fail("{}: weight_map value of tensor {} must be a file name", origin, quote_name(name));
    const auto& s = shard.get_ref<const std::string&>();
    if (!plain_file_name(s))
      fail("{}: tensor {}: shard {} is not a plain file name inside the model directory", origin,
           quote_name(name), quote_name(s));
    idx.weight_map.emplace(name, s);
  }
  if (auto md = j.find("metadata"); md != j.end() && md->is_object()) {
    if (auto ts = md->find("total_size"); ts != md->end() && ts->is_number_unsigned())
      idx.total_size = ts->get<uint64_t>();
  }
  return idx;
}

void SafetensorsSet::add_file(std::unique_ptr<SafetensorsFile> f,
                              const std::map<std::string, std::string>* index) {
  const std::string shard = f->path().filename().string();
  for (const auto& t : f->header().tensors) {
    if (index != nullptr) {
      auto it = index->find(t.name);
      if (it == index->end())
        fail("{}: tensor {} is not listed in {}", f->path().string(), quote_name(t.name),
             kIndexFile);
      if (it->second != shard)
        fail(
            "{}: tensor {} is listed under shard {} in the index (a tensor may live in one shard "
            "only)",
            f->path().string(), quote_name(t.name), quote_name(it->second));
    }
    const auto bytes = f->bytes(t);
    const std::byte* data = bytes.data();
    const size_t align = static_cast<size_t>(std::clamp(t.st->bits / 8, 1, 8));
    if (t.st->dtype && !bytes.empty() && reinterpret_cast<uintptr_t>(data) % align != 0) {
      auto copy = std::make_unique<std::byte[]>(bytes.size());  // new[]: 16-byte aligned
      std::memcpy(copy.get(), bytes.data(), bytes.size());
      data = copy.get();
      realigned_.push_back(std::move(copy));
    }
    auto [it, inserted] = tensors_.emplace(t.name, Entry{f.get(), &t, data});
    if (!inserted)
      fail("{}: tensor {} also appears in {} (a tensor may live in one shard only)",
           f->path().string(), quote_name(t.name), it->second.file->path().string());
  }
  files_.push_back(std::move(f));
}

std::shared_ptr<const SafetensorsSet> SafetensorsSet::open_file(const fs::path& file) {
  std::shared_ptr<SafetensorsSet> set(new SafetensorsSet());
  set->origin_ = file;
  set->add_file(std::make_unique<SafetensorsFile>(file), nullptr);
  return set;
}

std::shared_ptr<const SafetensorsSet> SafetensorsSet::open_dir(const fs::path& dir,
                                                               const ProgressFn& progress) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail("{}: not a directory", dir.string());
  std::shared_ptr<SafetensorsSet> set(new SafetensorsSet());
  LoadProgress pr;
  if (present(dir / kSingleFile)) {
    const fs::path p = resolve_inside(dir, kSingleFile, "weight file");
    set->origin_ = p;
    pr.bytes_total = fs::file_size(p, ec);
    if (progress) progress(pr);
    set->add_file(std::make_unique<SafetensorsFile>(p), nullptr);
    pr.bytes_mapped = set->files_.back()->file_size();
    if (progress) progress(pr);
    return set;
  }
  if (!present(dir / kIndexFile))
    fail("{}: no {} or {} (only safetensors weights are supported)", dir.string(), kSingleFile,
         kIndexFile);
  const fs::path index_path = resolve_inside(dir, kIndexFile, "index");
  set->origin_ = index_path;
  const SafetensorsIndex idx = parse_safetensors_index(
      read_regular_file(index_path, kSafetensorsMaxIndexBytes), index_path.string());
  set->index_total_size_ = idx.total_size;

  std::map<std::string, fs::path> shards;  // name -> checked path
  for (const auto& [tensor, shard] : idx.weight_map) {
    if (shards.count(shard)) continue;
    shards.emplace(
        shard, resolve_inside(dir, shard, fmt::format("shard (of tensor {})", quote_name(tensor))));
  }
  for (const auto& [name, p] : shards) pr.bytes_total += fs::file_size(p, ec);
  if (progress) progress(pr);
  for (const auto& [name, p] : shards) {
    set->add_file(std::make_unique<SafetensorsFile>(p), &idx.weight_map);
    pr.bytes_mapped += set->files_.back()->file_size();
    if (progress) progress(pr);
  }
  for (const auto& [tensor, shard] : idx.weight_map)
    if (!set->tensors_.count(tensor))
      fail("{}: tensor {} is listed in shard {} but that shard does not contain it",
           index_path.string(), quote_name(tensor), quote_name(shard));
  return set;
}

const SafetensorsSet::Entry* SafetensorsSet::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::span<const std::byte> SafetensorsSet::bytes(std::string_view name) const {
  const Entry* e = find(name);
  if (e == nullptr) fail("{}: no tensor {}", origin_.string(), quote_name(name));
  return {e->data, static_cast<size_t>(e->info->nbytes())};
}

TensorView SafetensorsSet::view(std::string_view name) const {
  const Entry* e = find(name);
  if (e == nullptr) fail("{}: no tensor {}", origin_.string(), quote_name(name));
  const TensorInfo& t = *e->info;
  if (!t.st->dtype)
    fail("{}: tensor {} has dtype {}, which ceiling cannot view", e->file->path().string(),
         quote_name(name), t.st->name);
  if (t.shape.size() > static_cast<size_t>(kMaxDims))
    fail("{}: tensor {} has {} dimensions (at most {} supported)", e->file->path().string(),
         quote_name(name), t.shape.size(), kMaxDims);
  TensorView v;
  v.data = const_cast<std::byte*>(e->data);  // read-only mapping: views must not be written
  v.dtype = *t.st->dtype;
  v.device = Device::kCpu;
  v.ndim = static_cast<int>(t.shape.size());
  int64_t stride = 1;
  for (int i = v.ndim - 1; i >= 0; --i) {
    v.shape[i] = t.shape[static_cast<size_t>(i)];
    v.strides[i] = stride;
    stride *= v.shape[i];
  }
  return v;
}

uint64_t SafetensorsSet::file_bytes() const {
  uint64_t n = 0;
  for (const auto& f : files_) n += f->file_size();
  return n;
}

}  // namespace ceiling
