// A read-only memory mapping of a whole file (POSIX mmap, PROT_READ, MAP_PRIVATE).
//
// Contract: bytes() stays valid for the object's lifetime; the object is move-only. An empty file
// maps to an empty span (no mapping). If another process truncates the file while it is mapped,
// reading the vanished pages raises SIGBUS — model files are assumed immutable while loaded.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace ceiling {

class MappedFile {
 public:
  MappedFile() = default;
  // Maps `path`; throws ceiling::Error naming the file and the OS error when it cannot be opened,
  // is not a regular file, or cannot be mapped.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void reset() noexcept;

  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ceiling
