#include "dist/tp_group.h"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/status.h"
#include "dist/cpu_communicator.h"
#include "dist/shard.h"

#if defined(HAVE_CEILING_NCCL)
#include "dist/nccl_communicator.h"
#endif

namespace ceiling::dist {

struct TpGroup::Rank {
  int rank = 0;
  RankShard shard;
  std::unique_ptr<engine::Ops> ops;
  std::unique_ptr<engine::Forward> fwd;
  engine::KvCache kv;
  engine::StepBatch step;  // the step with token ids in this rank's vocabulary slice
  std::vector<float> host;
  TensorView gathered;  // [N · R_max · Vp] f32: every rank's logits slice (run_gathered)
  TensorView full;      // rank 0: [R_max, V] f32, the joined logits
  std::thread thread;
};

struct TpGroup::Board {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t generation = 0;  // jobs posted
  int pending = 0;          // ranks still running the current job
  bool stop = false;
  const std::function<void(Rank&)>* job = nullptr;
  std::string first_error;
};

namespace {

std::vector<std::unique_ptr<engine::Communicator>> make_comms(const TpOptions& o) {
  if (o.device == "cpu") return make_cpu_communicators(o.world, o.timeout);
#if defined(HAVE_CEILING_NCCL)
  if (o.device == "cuda")
    return make_nccl_communicators(o.world, o.timeout, o.custom_all_reduce_max_bytes);
#endif
  fail("--tensor-parallel-size {} on device '{}': this build has no communicator for it{}", o.world,
       o.device, o.device == "cuda" ? " (it needs the CUDA toolkit's NCCL at build time)" : "");
}

}  // namespace

TpGroup::TpGroup(const ModelConfig& config, const ModelWeights& host, TpOptions options)
    : config_(config), options_(std::move(options)), board_(std::make_unique<Board>()) {
  check_shardable(config_, options_.world);
  comms_ = make_comms(options_);
  for (int r = 0; r < options_.world; ++r) {
    ranks_.push_back(std::make_unique<Rank>());
    ranks_.back()->rank = r;
  }
  for (auto& rk : ranks_) {
    Rank* p = rk.get();
    p->thread = std::thread([this, p] { worker(*p); });
  }
  try {
    load(host);
  } catch (...) {
    shutdown();
    throw;
  }
}

void TpGroup::load(const ModelWeights& host) {
  on_all([&](Rank& rk) {
    rk.shard = shard_weights(config_, host, rk.rank, options_.world);
    if (options_.make_ops) {
      rk.ops = options_.make_ops(rk.rank);
    } else {
      engine::OpsOptions oo = options_.ops;
      oo.device_index = rk.rank;
      rk.ops = engine::make_ops(options_.device, oo);
    }
    rk.ops->upload(rk.shard.config, rk.shard.weights);
    rk.ops->set_communicator(comms_[static_cast<size_t>(rk.rank)].get());
  });
}

TpGroup::~TpGroup() {
  shutdown();
}

void TpGroup::shutdown() {
  // Each rank's Ops is torn down on its own thread (its CUDA device is current there).
  try {
    if (broken_.empty())
      on_all([](Rank& rk) {
        rk.fwd.reset();
        rk.ops.reset();
      });
  } catch (const Error&) {
  }
  {
    std::lock_guard<std::mutex> lock(board_->mu);
    board_->stop = true;
  }
  board_->cv.notify_all();
  for (auto& rk : ranks_)
    if (rk->thread.joinable()) rk->thread.join();
  ranks_.clear();  // Ops (if a failure left them) before the communicators they point at
  comms_.clear();
}

void TpGroup::worker(Rank& rk) {
  Board& b = *board_;
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(Rank&)>* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(b.mu);
      b.cv.wait(lock, [&] { return b.stop || b.generation != seen; });
      if (b.stop) return;
      seen = b.generation;
      job = b.job;
    }
    std::string error;
    try {
      (*job)(rk);
    } catch (const std::exception& e) {
      error = e.what();
      // Wake the peers that wait for this rank inside a collective (NCCL: their kernels too).
      comms_[static_cast<size_t>(rk.rank)]->abort(error);
      for (auto& c : comms_) c->abort(fmt::format("rank {}: {}", rk.rank, error));
    }
    std::lock_guard<std::mutex> lock(b.mu);
    if (!error.empty() && b.first_error.empty()) b.first_error = error;
    if (--b.pending == 0) b.cv.notify_all();
  }
}

void TpGroup::on_all(const std::function<void(Rank&)>& fn) {
  CEILING_ENSURE(broken_.empty(), "tensor parallel group is unusable after an earlier failure: {}",
                 broken_);
  Board& b = *board_;
  std::unique_lock<std::mutex> lock(b.mu);
  b.job = &fn;
  b.pending = world();
  b.first_error.clear();
  ++b.generation;
  b.cv.notify_all();
  // Watchdog: a rank that is not back within the timeout is stuck (a dead peer, a collective
  // that never completes); aborting the communicators ends the waits (NCCL: its kernels too), so
  // every rank returns with an error.
  if (!b.cv.wait_for(lock, options_.timeout, [&] { return b.pending == 0; })) {
    const std::string why =
        fmt::format("tensor parallel step did not finish within {} ms on every rank (watchdog)",
                    options_.timeout.count());
    if (b.first_error.empty()) b.first_error = why;
    lock.unlock();
    for (auto& c : comms_) c->abort(why);
    lock.lock();
    b.cv.wait(lock, [&] { return b.pending == 0; });
  }
  b.job = nullptr;
  if (!b.first_error.empty()) {
    broken_ = b.first_error;
    fail("{}", broken_);
  }
}

const ModelConfig& TpGroup::rank_config() const {
  return ranks_.front()->shard.config;
}
DType TpGroup::kv_dtype() const {
  return ranks_.front()->ops->kv_dtype();
}
std::string TpGroup::communicator_name() const {
  return comms_.front()->name();
}

engine::Ops& TpGroup::ops(int rank) {
  CEILING_ENSURE(rank >= 0 && rank < world(), "TpGroup: no rank {}", rank);
  return *ranks_[static_cast<size_t>(rank)]->ops;
}

bool TpGroup::device_memory(size_t* free_bytes, size_t* total_bytes) {
  std::vector<size_t> f(ranks_.size()), t(ranks_.size());
  std::vector<char> has(ranks_.size(), 0);
  on_all([&](Rank& rk) {
    const size_t i = static_cast<size_t>(rk.rank);
    has[i] = rk.ops->device_memory(&f[i], &t[i]);
  });
  if (!has[0]) return false;
  const size_t i = static_cast<size_t>(std::min_element(f.begin(), f.end()) - f.begin());
  *free_bytes = f[i];
  *total_bytes = t[i];
  return true;
}

void TpGroup::init(engine::ForwardLimits limits, int num_blocks, int block_size) {
  on_all([&](Rank& rk) {
    rk.fwd = std::make_unique<engine::Forward>(*rk.ops, limits);
    rk.kv = rk.ops->alloc_kv_cache(num_blocks, block_size);
  });
  num_blocks_ = num_blocks;
  block_size_ = block_size;
  limits_ = limits;
}

std::span<const float> TpGroup::run(const engine::StepBatch& step) {
  CEILING_ENSURE(num_blocks_ > 0, "TpGroup::run before init()");
  step.validate(num_blocks_, block_size_);  // input errors leave the group usable
  const int R = step.num_logits_rows(), V = config_.vocab_size;
  logits_.resize(static_cast<size_t>(R) * static_cast<size_t>(V));
  on_all([&](Rank& rk) {
    const VocabSlice& vs = rk.shard.vocab;
    rk.step = step;
    for (int32_t& id : rk.step.token_ids) id = vs.local_token(id);
    const TensorView l = rk.fwd->run(rk.step, rk.kv);  // [R, Vp]
    rk.host.resize(static_cast<size_t>(l.numel()));
    rk.ops->to_host(l, rk.host.data());
    const size_t w = static_cast<size_t>(l.dim(1));
    for (size_t r = 0; r < static_cast<size_t>(R); ++r)  // disjoint columns per rank
      std::copy_n(rk.host.data() + r * w, vs.valid, logits_.data() + r * V + vs.begin);
  });
  return logits_;
}

TensorView TpGroup::run_gathered(const engine::StepBatch& step) {
  CEILING_ENSURE(num_blocks_ > 0, "TpGroup::run_gathered before init()");
  step.validate(num_blocks_, block_size_);  // input errors leave the group usable
  const int64_t R = step.num_logits_rows(), V = config_.vocab_size, N = world();
  TensorView result;
  on_all([&](Rank& rk) {
    rk.step = step;
    for (int32_t& id : rk.step.token_ids) id = rk.shard.vocab.local_token(id);
    const TensorView l = rk.fwd->run(rk.step, rk.kv);  // [R, Vp]
    const int64_t Vp = l.dim(1);
    if (!rk.gathered.data) {
      rk.gathered = rk.ops->alloc(DType::kF32, {N * limits_.max_logits_rows * Vp});
      if (rk.rank == 0) rk.full = rk.ops->alloc(DType::kF32, {limits_.max_logits_rows, V});
    }
    if (R == 0) return;
    float* g = rk.gathered.as<float>();
    rk.ops->all_gather(TensorView(l.data, DType::kF32, {R * Vp}, l.device),
                       TensorView(g, DType::kF32, {N * R * Vp}, l.device));
    if (rk.rank != 0) return;  // the next step's work queues behind the gather on each stream
    for (int64_t r = 0; r < N; ++r) {  // shards are read-only after load: safe from this thread
      const VocabSlice& vs = ranks_[static_cast<size_t>(r)]->shard.vocab;
      rk.ops->copy_columns(TensorView(g + r * R * Vp, DType::kF32, {R, Vp}, l.device), vs.valid,
                           engine::rows(rk.full, R), vs.begin);
    }
    result = engine::rows(rk.full, R);
  });
  return result;
}

void TpGroup::sample(const TensorView& logits, std::span<const engine::SampleRequest> reqs,
                     int32_t* ids) {
  on_all([&](Rank& rk) {
    if (rk.rank == 0) rk.ops->sample(logits, reqs, ids);
  });
}

void TpGroup::to_host(const TensorView& logits, float* dst) {
  on_all([&](Rank& rk) {
    if (rk.rank == 0) rk.ops->to_host(logits, dst);
  });
}

}  // namespace ceiling::dist
