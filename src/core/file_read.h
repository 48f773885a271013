// Bounded reads of files that come from outside (model directories, CLI flags): only regular
// files, never more than a stated number of bytes, and for a model directory only files that
// resolve (through any symlinks) inside it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace ceiling {

// The whole contents of `path`. Throws ceiling::Error naming the file when it cannot be opened,
// is not a regular file (a directory, /dev/zero, a FIFO), or holds more than `max_bytes` bytes.
// Never reads more than max_bytes + 1 bytes, so a file that grows while read is still bounded.
std::string read_regular_file(const std::filesystem::path& path, uint64_t max_bytes);

// dir/name after checking that it resolves, through any symlinks, to a regular file inside
// `dir`, or, when `dir` is a Hugging Face cache snapshot (…/snapshots/<rev>/), inside the
// cache's …/blobs/ folder. `what` names the file's role in errors ("config", "weight file").
// Throws naming dir, the file and the rule; never names the outside target's contents.
std::filesystem::path contained_file(const std::filesystem::path& dir, std::string_view name,
                                     std::string_view what);

// True when dir/name exists as a directory entry (a dangling symlink counts: contained_file
// reports it).
bool dir_entry_present(const std::filesystem::path& dir, std::string_view name);

// `s` quoted for a one-line error message: printable ASCII kept, other bytes (and ' and \\)
// escaped as \\xNN, cut after `max_len` bytes with "...". The only way file contents or names
// from outside may appear in an error.
std::string quote_text(std::string_view s, size_t max_len = 160);

// contained_file + read_regular_file.
std::string read_model_file(const std::filesystem::path& dir, std::string_view name,
                            std::string_view what, uint64_t max_bytes);

}  // namespace ceiling
