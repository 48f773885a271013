#include "core/file_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/status.h"

namespace ceiling {

namespace fs = std::filesystem;

namespace {

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

bool is_within(const fs::path& base, const fs::path& p) {
  auto [bi, pi] = std::mismatch(base.begin(), base.end(), p.begin(), p.end());
  return bi == base.end() && pi != p.end();
}

}  // namespace

std::string read_regular_file(const fs::path& path, uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is then refused as not regular.
  const Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (f.fd < 0) fail("{}: cannot open: {}", path.string(), std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) fail("{}: cannot stat: {}", path.string(), std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail("{}: is a directory, expected a regular file", path.string());
  if (!S_ISREG(st.st_mode)) fail("{}: not a regular file", path.string());
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    fail("{}: {} bytes, over the limit of {} bytes for this file", path.string(), st.st_size,
         max_bytes);
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  for (;;) {
    if (got == out.size()) {  // the file may have grown since fstat: read on, up to the cap
      if (out.size() > max_bytes)
        fail("{}: more than the limit of {} bytes for this file", path.string(), max_bytes);
      out.resize(std::min<uint64_t>(max_bytes + 1, std::max<size_t>(2 * out.size(), 4096)));
    }
    const ssize_t n = ::read(f.fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("{}: read error: {}", path.string(), std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > max_bytes)
    fail("{}: more than the limit of {} bytes for this file", path.string(), max_bytes);
  out.resize(got);
  return out;
}

std::string quote_text(std::string_view s, size_t max_len) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < max_len; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\')
      out += static_cast<char>(c);
    else
      out += fmt::format("\\x{:02x}", c);
  }
  if (s.size() > max_len) out += "...";
  return out + "'";
}

bool dir_entry_present(const fs::path& dir, std::string_view name) {
  std::error_code ec;
  return fs::symlink_status(dir / name, ec).type() != fs::file_type::not_found && !ec;
}

fs::path contained_file(const fs::path& dir, std::string_view name, std::string_view what) {
  const fs::path p = dir / name;
  std::error_code ec;
  const fs::path base = fs::canonical(dir, ec);
  if (ec) fail("{}: cannot resolve model directory: {}", dir.string(), ec.message());
  const fs::path target = fs::canonical(p, ec);
  if (ec) fail("{}: {} {} does not exist ({})", dir.string(), what, quote_text(name), ec.message());
  bool inside = is_within(base, target);
  if (!inside && base.parent_path().filename() == "snapshots")
    inside = is_within(base.parent_path().parent_path() / "blobs", target);
  if (!inside)
    fail("{}: {} {} resolves to {}, outside the model directory (symlinks must stay inside it)",
         dir.string(), what, quote_text(name), quote_text(target.string()));
  if (!fs::is_regular_file(target, ec))
    fail("{}: {} {} is not a regular file", dir.string(), what, quote_text(name));
  return p;
}

std::string read_model_file(const fs::path& dir, std::string_view name, std::string_view what,
                            uint64_t max_bytes) {
  return read_regular_file(contained_file(dir, name, what), max_bytes);
}

}  // namespace ceiling
