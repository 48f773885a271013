#include "engine/step_batch.h"

#include "core/status.h"

namespace ceiling::engine {

void StepBatch::validate(int num_blocks, int block_size) const {
  const int T = num_tokens(), S = num_seqs();
  CEILING_ENSURE(T > 0 && S > 0, "step: empty batch ({} tokens, {} sequences)", T, S);
  CEILING_ENSURE(positions.size() == token_ids.size() && slot_mapping.size() == token_ids.size(),
                 "step: token_ids, positions and slot_mapping must all have T = {} entries (got "
                 "{}, {})",
                 T, positions.size(), slot_mapping.size());
  CEILING_ENSURE(static_cast<int>(query_start.size()) == S + 1,
                 "step: query_start must have S+1 = {} entries (got {})", S + 1,
                 query_start.size());
  CEILING_ENSURE(max_blocks > 0 && block_tables.size() ==
                                       static_cast<size_t>(S) * static_cast<size_t>(max_blocks),
                 "step: block_tables must be [S={}, max_blocks={}] (got {} entries)", S, max_blocks,
                 block_tables.size());
  CEILING_ENSURE(query_start[0] == 0 && query_start[S] == T,
                 "step: query_start must run from 0 to T = {} (got {} .. {})", T, query_start[0],
                 query_start[S]);
  for (int s = 0; s < S; ++s) {
    const int q0 = query_start[s], q_len = query_start[s + 1] - q0, ctx = seq_lens[s];
    CEILING_ENSURE(q_len >= 1 && q_len <= ctx,
                   "step: sequence {} has {} new tokens and context {} (need 1 <= new <= context)",
                   s, q_len, ctx);
    CEILING_ENSURE(ctx <= max_blocks * block_size,
                   "step: sequence {} context {} exceeds its block table ({} blocks of {})", s, ctx,
                   max_blocks, block_size);
    const int32_t* table = block_tables.data() + static_cast<size_t>(s) * max_blocks;
    for (int b = 0; b < (ctx + block_size - 1) / block_size; ++b)
      CEILING_ENSURE(table[b] >= 0 && table[b] < num_blocks,
                     "step: sequence {} block {} is {} (cache has {} blocks)", s, b, table[b],
                     num_blocks);
    for (int j = 0; j < q_len; ++j) {
      const int t = q0 + j, pos = ctx - q_len + j;
      CEILING_ENSURE(positions[t] == pos, "step: token {} of sequence {} has position {} (want {})",
                     t, s, positions[t], pos);
      const int64_t slot = int64_t{table[pos / block_size]} * block_size + pos % block_size;
      CEILING_ENSURE(slot_mapping[t] == slot,
                     "step: token {} has slot {} but its block table gives {}", t, slot_mapping[t],
                     slot);
    }
  }
  for (int r = 0; r < num_logits_rows(); ++r)
    CEILING_ENSURE(logits_rows[r] >= 0 && logits_rows[r] < T,
                   "step: logits row {} is token {} (T = {})", r, logits_rows[r], T);
}

void append_sequence(StepBatch& step, const std::vector<int32_t>& ids, int start_pos,
                     const std::vector<int32_t>& blocks, int block_size, bool want_logits) {
  CEILING_ENSURE(!ids.empty(), "step: a sequence chunk needs at least one token");
  CEILING_ENSURE(step.max_blocks >= static_cast<int>(blocks.size()),
                 "step: block table of {} blocks exceeds max_blocks {}", blocks.size(),
                 step.max_blocks);
  const int ctx = start_pos + static_cast<int>(ids.size());
  CEILING_ENSURE(static_cast<int64_t>(blocks.size()) * block_size >= ctx,
                 "step: {} blocks of {} cannot hold a context of {}", blocks.size(), block_size,
                 ctx);
  if (step.query_start.empty()) step.query_start.push_back(0);
  for (size_t j = 0; j < ids.size(); ++j) {
    const int pos = start_pos + static_cast<int>(j);
    step.token_ids.push_back(ids[j]);
    step.positions.push_back(pos);
    step.slot_mapping.push_back(blocks[pos / block_size] * block_size + pos % block_size);
  }
  step.query_start.push_back(step.num_tokens());
  step.seq_lens.push_back(ctx);
  step.block_tables.insert(step.block_tables.end(), blocks.begin(), blocks.end());
  step.block_tables.insert(step.block_tables.end(), step.max_blocks - blocks.size(), -1);
  if (want_logits) step.logits_rows.push_back(step.num_tokens() - 1);
}

}  // namespace ceiling::engine
