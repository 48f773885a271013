// libFuzzer target: arbitrary bytes as config.json (parse_model_config) and as
// generation_config.json (parse_generation_config). Either may reject the input with
// ceiling::Error; anything else is a bug, and so is an accepted config whose derived sizes
// break the bounds check_model_sizes promises (model/config.h).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/status.h"
#include "model/config.h"
#include "model/loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ceiling;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const ModelConfig c = parse_model_config(text, "fuzz/config.json");
    if (int64_t{c.num_heads} * c.head_dim > kMaxDim || c.q_dim() <= 0 || c.kv_dim() <= 0 ||
        int64_t{c.q_dim()} + 2 * int64_t{c.kv_dim()} > kMaxDim || c.num_layers > kMaxLayers ||
        c.num_params() <= 0)
      std::abort();
  } catch (const Error&) {
  }
  try {
    (void)parse_generation_config(text, "fuzz/generation_config.json");
  } catch (const Error&) {
  }
  return 0;
}
