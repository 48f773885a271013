// libFuzzer target: arbitrary bytes as a whole safetensors file (parse_safetensors on the span,
// no file needed) and as an index (parse_safetensors_index). Either parser may reject the input
// with ceiling::Error; anything else — a crash, a sanitizer report, another exception, a header
// whose tensors do not tile the data section — is a bug. Accepted tensors' bytes are all read so
// ASan checks every offset the parser let through.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/status.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ceiling;
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  try {
    const SafetensorsHeader h = parse_safetensors(file, "fuzz.safetensors");
    uint64_t covered = 0;
    unsigned sum = 0;
    for (const auto& t : h.tensors) {
      if (t.begin != covered || t.end < t.begin || t.st == nullptr) std::abort();
      covered = t.end;
      if (h.find(t.name) == nullptr) std::abort();
      const auto bytes = file.subspan(static_cast<size_t>(h.data_start + t.begin),
                                      static_cast<size_t>(t.nbytes()));
      for (std::byte b : bytes) sum += static_cast<unsigned>(b);
    }
    if (h.data_start + covered != size) std::abort();
    volatile unsigned sink = sum;
    (void)sink;
  } catch (const Error&) {
  }
  try {
    const SafetensorsIndex idx = parse_safetensors_index(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.index.json");
    for (const auto& [tensor, shard] : idx.weight_map)
      if (shard.empty() || shard == ".." || shard.find('/') != std::string::npos) std::abort();
  } catch (const Error&) {
  }
  return 0;
}
