// The per-step batch metadata: which tokens run in this forward step, where they sit, where their
// K/V go and which rows produce logits. Built on the host by the generation loop (later: the
// scheduler) and handed to Ops::prepare, which makes it visible to the kernels. Never a global.
//
// Shapes: T = tokens in the step, S = sequences, R = logits rows, MB = max_blocks.
#pragma once

#include <cstdint>
#include <vector>

namespace ceiling::engine {

struct StepBatch {
  std::vector<int32_t> token_ids;     // [T]
  std::vector<int32_t> positions;     // [T] position of each token in its sequence
  std::vector<int32_t> slot_mapping;  // [T] KV slot = block * block_size + row of the position
  std::vector<int32_t>
      query_start;                // [S+1] tokens of sequence s: [query_start[s], query_start[s+1])
  std::vector<int32_t> seq_lens;  // [S] context length of s after this step (new tokens included)
  int max_blocks = 0;             // MB: row length of block_tables
  std::vector<int32_t> block_tables;  // [S, MB] physical block ids; unused entries -1
  std::vector<int32_t> logits_rows;   // [R] token rows whose logits are wanted (usually the last
                                      //     token of each sequence: query_start[s+1] - 1)

  int num_tokens() const { return static_cast<int>(token_ids.size()); }
  int num_seqs() const { return static_cast<int>(seq_lens.size()); }
  int num_logits_rows() const { return static_cast<int>(logits_rows.size()); }
  // True when every sequence adds exactly one token (a decode step).
  bool is_decode() const { return num_tokens() == num_seqs(); }

  // Checks every invariant the kernels rely on (sizes agree; query_start ascending from 0 to T;
  // 1 <= q_len <= seq_len; positions of sequence s are seq_len - q_len .. seq_len - 1; every block
  // a position needs is in [0, num_blocks); slot_mapping agrees with the block table; logits rows
  // in [0, T)). Throws ceiling::Error naming the field and the index.
  void validate(int num_blocks, int block_size) const;
};

// Appends one sequence's chunk to `step`: tokens [ids] at positions start_pos.., whose context
// after the step is start_pos + ids.size(), with the sequence's block table `blocks` (it must
// cover that context). When `want_logits`, the chunk's last token becomes a logits row.
// `step.max_blocks` must be set before the first call; shorter tables are padded with -1.
void append_sequence(StepBatch& step, const std::vector<int32_t>& ids, int start_pos,
                     const std::vector<int32_t>& blocks, int block_size, bool want_logits);

}  // namespace ceiling::engine
