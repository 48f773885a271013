#include "dist/tp_group.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "core/status.h"
#include "dist/control.h"
#include "dist/cpu_communicator.h"
#include "dist/shard.h"

#if defined(HAVE_CEILING_NCCL)
#include "dist/nccl_communicator.h"
#endif

namespace ceiling::dist {

using Clock = std::chrono::steady_clock;

struct TpGroup::Rank {
  int local = 0;   // index in this process
  int global = 0;  // rank in the group
  RankShard shard;
  std::unique_ptr<engine::Ops> ops;
  std::unique_ptr<engine::Forward> fwd;
  engine::KvCache kv;
  engine::StepBatch step;  // the step with token ids in this rank's vocabulary slice
  std::thread thread;
};

struct TpGroup::Board {
  std::mutex mu;
  std::condition_variable cv;           // rank threads wait for a job, the caller for its end
  std::atomic<uint64_t> generation{0};  // jobs posted
  std::atomic<int> pending{0};          // rank threads still running the current job
  std::atomic<bool> stop{false};
  const std::function<void(Rank&)>* job = nullptr;
  std::string first_error;  // guarded by mu
  std::chrono::microseconds spin{0};
  // The watchdog: when the current call began (0: none in flight), steady-clock ns.
  std::atomic<int64_t> call_began_ns{0};
  std::condition_variable watch_cv;
  std::thread watch_thread;
};

// The driver: one connection per worker process (index p - 1), each with a reader thread that
// queues replies and turns an error or a closed connection into a group failure. A worker: the
// connection to the driver.
struct TpGroup::Remote {
  struct Link {
    std::unique_ptr<Connection> conn;
    std::thread reader;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Message> replies;
    std::string failed;  // the reader's end: an error message or a closed connection
  };
  std::vector<std::unique_ptr<Link>> workers;
  std::unique_ptr<Connection> driver;
  std::atomic<bool> stopping{false};
};

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

inline void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until pred() or `spin` has passed; then the caller sleeps on the condition variable.
template <typename Pred>
bool spin_until(std::chrono::microseconds spin, Pred pred) {
  if (spin.count() <= 0) return pred();
  const auto until = Clock::now() + spin;
  for (int i = 0;; ++i) {
    if (pred()) return true;
    if ((i & 255) == 255 && Clock::now() > until) return false;
    cpu_relax();
  }
}

#if defined(HAVE_CEILING_NCCL)
// A fingerprint of the shapes every process must agree on.
uint64_t config_fingerprint(const ModelConfig& c) {
  uint64_t h = 1469598103934665603ull;
  for (int64_t v : {int64_t{static_cast<int>(c.arch)}, int64_t{c.vocab_size},
                    int64_t{c.hidden_size}, int64_t{c.intermediate_size}, int64_t{c.num_layers},
                    int64_t{c.num_heads}, int64_t{c.num_kv_heads}, int64_t{c.head_dim}}) {
    h ^= static_cast<uint64_t>(v);
    h *= 1099511628211ull;
  }
  return h;
}
#endif

std::vector<std::unique_ptr<engine::Communicator>> make_local_comms(const TpOptions& o) {
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
  const int local = ranks_per_process(options_.process, options_.world);
  board_->spin = options_.spin.value_or(options_.device == "cuda" ? std::chrono::milliseconds(20)
                                                                  : std::chrono::microseconds(0));
  if (options_.process.multi()) {
    connect();
  } else {
    comms_ = make_local_comms(options_);
  }
  const int first = options_.process.rank * local;
  for (int r = 0; r < local; ++r) {
    ranks_.push_back(std::make_unique<Rank>());
    ranks_.back()->local = r;
    ranks_.back()->global = first + r;
  }
  for (size_t r = 1; r < ranks_.size(); ++r) {
    Rank* p = ranks_[r].get();
    p->thread = std::thread([this, p] { worker(*p); });
  }
  board_->watch_thread = std::thread([this] { watchdog(); });
  try {
    load(host);
  } catch (...) {
    shutdown();
    throw;
  }
}

void TpGroup::connect() {
  const ProcessGroup& pg = options_.process;
  CEILING_ENSURE(options_.device == "cuda",
                 "{} processes (WORLD_SIZE): multi-process tensor parallelism needs --device cuda "
                 "(NCCL); on cpu run the ranks in one process",
                 pg.size);
#if defined(HAVE_CEILING_NCCL)
  remote_ = std::make_unique<Remote>();
  const int local = options_.world / pg.size;
  NcclId id;
  if (pg.rank == 0) {
    auto conns = accept_workers(pg.master_addr, pg.master_port, pg.size - 1, options_.timeout);
    std::vector<std::unique_ptr<Connection>> by_process(static_cast<size_t>(pg.size));
    std::string refused;
    for (auto& c : conns) {
      const Hello h = decode_hello(c->recv_within(options_.timeout).payload);
      std::string why;
      if (h.processes != pg.size || h.world != options_.world || h.local_ranks != local)
        why = fmt::format(
            "process {} has WORLD_SIZE {} and --tensor-parallel-size {} ({} local "
            "GPUs); process 0 has {} and {} ({})",
            h.process, h.processes, h.world, h.local_ranks, pg.size, options_.world, local);
      else if (h.fingerprint != config_fingerprint(config_))
        why = fmt::format("process {} loaded another model ({}) than process 0 ({})", h.process,
                          h.model, config_.name);
      else if (h.process < 1 || h.process >= pg.size || by_process[h.process])
        why = fmt::format("two processes claim RANK {}", h.process);
      if (!why.empty() && refused.empty()) refused = why;
      if (why.empty()) by_process[static_cast<size_t>(h.process)] = std::move(c);
    }
    if (!refused.empty()) {
      for (auto& c : by_process)
        if (c) c->send(MsgType::kError, encode_text(refused));
      for (auto& c : conns)
        if (c) c->send(MsgType::kError, encode_text(refused));
      fail("tensor parallel start-up: {}", refused);
    }
    id = nccl_unique_id();
    std::vector<uint8_t> idb(id.bytes.begin(), id.bytes.end());
    for (int p = 1; p < pg.size; ++p) {
      auto link = std::make_unique<Remote::Link>();
      link->conn = std::move(by_process[static_cast<size_t>(p)]);
      link->conn->send(MsgType::kWelcome, idb);
      remote_->workers.push_back(std::move(link));
    }
    for (size_t i = 0; i < remote_->workers.size(); ++i) {
      Remote::Link* l = remote_->workers[i].get();
      const int p = static_cast<int>(i) + 1;
      l->reader = std::thread([this, l, p] {
        for (;;) {
          std::string failed;
          try {
            Message m = l->conn->recv();
            if (m.type != MsgType::kError) {
              std::lock_guard<std::mutex> lock(l->mu);
              l->replies.push_back(std::move(m));
              l->cv.notify_all();
              continue;
            }
            failed = fmt::format("process {}: {}", p, decode_text(m.payload));
          } catch (const std::exception& e) {
            if (remote_->stopping) return;
            failed = e.what();
          }
          {
            std::lock_guard<std::mutex> lock(l->mu);
            l->failed = failed;
            l->cv.notify_all();
          }
          fail_group(failed);
          return;
        }
      });
    }
  } else {
    remote_->driver = connect_to_master(pg.master_addr, pg.master_port, options_.timeout);
    Hello h;
    h.process = pg.rank;
    h.processes = pg.size;
    h.world = options_.world;
    h.local_ranks = local;
    h.fingerprint = config_fingerprint(config_);
    h.model = config_.name;
    remote_->driver->send(MsgType::kHello, encode(h));
    const Message w = remote_->driver->recv_within(options_.timeout);
    if (w.type == MsgType::kError) fail("tensor parallel start-up: {}", decode_text(w.payload));
    CEILING_ENSURE(w.type == MsgType::kWelcome && w.payload.size() == id.bytes.size(),
                   "tensor parallel start-up: an unexpected reply from process 0");
    std::copy(w.payload.begin(), w.payload.end(), id.bytes.begin());
  }
  comms_ = make_nccl_communicators(options_.world, pg.rank * local, local, id, options_.timeout);
#else
  fail("multi-process tensor parallelism needs NCCL at build time");
#endif
}

void TpGroup::load(const ModelWeights& host) {
  on_all([&](Rank& rk) {
    rk.shard = shard_weights(config_, host, rk.global, options_.world);
    if (options_.make_ops) {
      rk.ops = options_.make_ops(rk.global);
    } else {
      engine::OpsOptions oo = options_.ops;
      oo.device_index = rk.local;
      rk.ops = engine::make_ops(options_.device, oo);
    }
    rk.ops->upload(rk.shard.config, rk.shard.weights);
    rk.ops->set_communicator(comms_[static_cast<size_t>(rk.local)].get());
  });
}

TpGroup::~TpGroup() {
  shutdown();
}

void TpGroup::shutdown() {
  if (remote_ && !remote_->workers.empty()) {
    remote_->stopping = true;
    for (auto& l : remote_->workers) {
      try {
        l->conn->send(MsgType::kStop);
      } catch (const Error&) {
      }
    }
  }
  // Each rank's Ops is torn down on its own thread (its CUDA device is current there).
  try {
    if (broken_.empty() && !ranks_.empty())
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
  board_->watch_cv.notify_all();
  for (auto& rk : ranks_)
    if (rk->thread.joinable()) rk->thread.join();
  if (board_->watch_thread.joinable()) board_->watch_thread.join();
  if (remote_) {
    remote_->stopping = true;
    for (auto& l : remote_->workers) {
      l->conn->shutdown();
      if (l->reader.joinable()) l->reader.join();
    }
  }
  ranks_.clear();  // Ops (if a failure left them) before the communicators they point at
  comms_.clear();
}

void TpGroup::fail_group(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(board_->mu);
    if (board_->first_error.empty()) board_->first_error = why;
  }
  // Wakes the ranks that wait inside a collective (NCCL: their kernels too).
  for (auto& c : comms_) c->abort(why);
}

void TpGroup::run_job(Rank& rk, const std::function<void(Rank&)>& fn) {
  try {
    fn(rk);
  } catch (const std::exception& e) {
    fail_group(e.what());
  }
}

void TpGroup::worker(Rank& rk) {
  Board& b = *board_;
  uint64_t seen = 0;
  for (;;) {
    const auto posted = [&] {
      return b.stop.load(std::memory_order_acquire) ||
             b.generation.load(std::memory_order_acquire) != seen;
    };
    if (!spin_until(b.spin, posted)) {
      std::unique_lock<std::mutex> lock(b.mu);
      b.cv.wait(lock, posted);
    }
    if (b.stop) return;
    seen = b.generation.load(std::memory_order_acquire);
    run_job(rk, *b.job);
    if (b.pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(b.mu);  // the caller may be about to sleep
      b.cv.notify_all();
    }
  }
}

void TpGroup::watchdog() {
  Board& b = *board_;
  std::unique_lock<std::mutex> lock(b.mu);
  for (;;) {
    b.watch_cv.wait_for(lock, std::chrono::milliseconds(100));
    if (b.stop) return;
    const int64_t began = b.call_began_ns.load();
    if (began == 0 || now_ns() - began < std::chrono::nanoseconds(options_.timeout).count())
      continue;
    b.call_began_ns = 0;  // once per call
    lock.unlock();
    fail_group(
        fmt::format("tensor parallel step did not finish within {} ms on every rank (watchdog)",
                    options_.timeout.count()));
    lock.lock();
  }
}

void TpGroup::on_all(const std::function<void(Rank&)>& fn) {
  CEILING_ENSURE(broken_.empty(), "tensor parallel group is unusable after an earlier failure: {}",
                 broken_);
  Board& b = *board_;
  {
    std::lock_guard<std::mutex> lock(b.mu);
    if (!b.first_error.empty()) {  // a worker process failed between calls
      broken_ = b.first_error;
      fail("{}", broken_);
    }
    b.job = &fn;
    b.pending.store(local_ranks() - 1, std::memory_order_relaxed);
    b.call_began_ns = now_ns();
    b.generation.fetch_add(1, std::memory_order_release);
  }
  b.cv.notify_all();
  if (ranks_.front()->ops) ranks_.front()->ops->bind_thread();
  run_job(*ranks_.front(), fn);
  const auto done = [&] { return b.pending.load(std::memory_order_acquire) == 0; };
  std::unique_lock<std::mutex> lock(b.mu);
  if (!done()) {
    lock.unlock();
    const bool spun = spin_until(b.spin, done);
    lock.lock();
    if (!spun) b.cv.wait(lock, done);
  }
  b.call_began_ns = 0;
  b.job = nullptr;
  if (!b.first_error.empty()) {
    broken_ = b.first_error;
    fail("{}", broken_);
  }
}

void TpGroup::on_first(const std::function<void(Rank&)>& fn) {
  CEILING_ENSURE(broken_.empty(), "tensor parallel group is unusable after an earlier failure: {}",
                 broken_);
  Board& b = *board_;
  b.call_began_ns = now_ns();
  Rank& rk = *ranks_.front();
  rk.ops->bind_thread();
  run_job(rk, fn);
  b.call_began_ns = 0;
  std::lock_guard<std::mutex> lock(b.mu);
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
  CEILING_ENSURE(rank >= 0 && rank < local_ranks(), "TpGroup: no rank {} in this process", rank);
  return *ranks_[static_cast<size_t>(rank)]->ops;
}

bool TpGroup::local_device_memory(size_t* free_bytes, size_t* total_bytes) {
  std::vector<size_t> f(ranks_.size()), t(ranks_.size());
  std::vector<char> has(ranks_.size(), 0);
  on_all([&](Rank& rk) {
    const size_t i = static_cast<size_t>(rk.local);
    has[i] = rk.ops->device_memory(&f[i], &t[i]);
  });
  if (!has[0]) return false;
  const size_t i = static_cast<size_t>(std::min_element(f.begin(), f.end()) - f.begin());
  *free_bytes = f[i];
  *total_bytes = t[i];
  return true;
}

bool TpGroup::device_memory(size_t* free_bytes, size_t* total_bytes) {
  if (!local_device_memory(free_bytes, total_bytes)) return false;
  if (!remote_) return true;
  ask_workers(MsgType::kMemory, {}, [&](const Message& m) {
    CEILING_ENSURE(m.type == MsgType::kMemoryReply && m.payload.size() == 16,
                   "tensor parallel: an unexpected reply to a memory query");
    uint64_t v[2];
    std::memcpy(v, m.payload.data(), 16);
    if (v[0] < *free_bytes) {
      *free_bytes = v[0];
      *total_bytes = v[1];
    }
  });
  return true;
}

void TpGroup::local_init(engine::ForwardLimits limits, int num_blocks, int block_size) {
  std::vector<engine::VocabPart> parts;
  for (int r = 0; r < world(); ++r) {
    const VocabSlice vs = vocab_slice(config_, r, world());
    parts.push_back({vs.begin, vs.valid});
  }
  on_all([&](Rank& rk) {
    rk.fwd = std::make_unique<engine::Forward>(*rk.ops, limits);
    rk.fwd->set_logits_join(parts, config_.vocab_size, rk.global == 0);
    rk.kv = rk.ops->alloc_kv_cache(num_blocks, block_size);
  });
  num_blocks_ = num_blocks;
  block_size_ = block_size;
  limits_ = limits;
}

void TpGroup::init(engine::ForwardLimits limits, int num_blocks, int block_size) {
  local_init(limits, num_blocks, block_size);
  if (remote_)
    ask_workers(
        MsgType::kInit, encode(InitMsg{limits, num_blocks, block_size}), [](const Message& m) {
          CEILING_ENSURE(m.type == MsgType::kOk, "tensor parallel: an unexpected reply to init");
        });
}

std::span<const float> TpGroup::run(const engine::StepBatch& step) {
  CEILING_ENSURE(!remote_, "TpGroup::run (logits on the host) needs every rank in one process");
  const TensorView l = run_gathered(step);  // [R, V] on rank 0
  logits_.resize(static_cast<size_t>(l.numel()));
  to_host(l, logits_.data());
  return logits_;
}

TensorView TpGroup::local_run_gathered(const engine::StepBatch& step) {
  TensorView result;
  on_all([&](Rank& rk) {
    rk.step = step;
    for (int32_t& id : rk.step.token_ids) id = rk.shard.vocab.local_token(id);
    const TensorView l = rk.fwd->run(rk.step, rk.kv);  // rank 0: the joined [R, V]
    if (rk.global == 0) result = l;
  });
  return result;
}

TensorView TpGroup::run_gathered(const engine::StepBatch& step) {
  CEILING_ENSURE(num_blocks_ > 0, "TpGroup::run_gathered before init()");
  step.validate(num_blocks_, block_size_);     // input errors leave the group usable
  if (remote_ && !remote_->workers.empty()) {  // the workers start while this process does
    const std::vector<uint8_t> msg = encode(step);
    for (auto& l : remote_->workers) {
      try {
        l->conn->send(MsgType::kStep, msg);
      } catch (const Error& e) {
        fail_group(e.what());
      }
    }
  }
  return local_run_gathered(step);
}

void TpGroup::sample(const TensorView& logits, std::span<const engine::SampleRequest> reqs,
                     int32_t* ids) {
  on_first([&](Rank& rk) { rk.ops->sample(logits, reqs, ids); });
}

void TpGroup::to_host(const TensorView& logits, float* dst) {
  on_first([&](Rank& rk) { rk.ops->to_host(logits, dst); });
}

void TpGroup::serve_worker() {
  CEILING_ENSURE(remote_ && remote_->driver, "TpGroup::serve_worker: not a worker process");
  Connection& d = *remote_->driver;
  for (;;) {
    try {
      const Message m = d.recv();
      switch (m.type) {
        case MsgType::kInit: {
          const InitMsg in = decode_init(m.payload);
          local_init(in.limits, in.num_blocks, in.block_size);
          d.send(MsgType::kOk);
          break;
        }
        case MsgType::kMemory: {
          size_t f = 0, t = 0;
          local_device_memory(&f, &t);
          uint64_t v[2] = {f, t};
          std::vector<uint8_t> p(16);
          std::memcpy(p.data(), v, 16);
          d.send(MsgType::kMemoryReply, p);
          break;
        }
        case MsgType::kStep: {
          const engine::StepBatch step = decode_step(m.payload);
          CEILING_ENSURE(num_blocks_ > 0, "a step before init");
          local_run_gathered(step);
          break;
        }
        case MsgType::kStop:
          return;
        default:
          fail("an unexpected control message {} from process 0", static_cast<int>(m.type));
      }
    } catch (const std::exception& e) {
      // Kernels waiting for a peer end (the driver's side aborts on this message or on the
      // closed connection), and the teardown skips the collectives.
      fail_group(e.what());
      broken_ = e.what();
      try {
        d.send(MsgType::kError, encode_text(e.what()));
      } catch (const Error&) {
      }
      throw;
    }
  }
}

void TpGroup::ask_workers(MsgType type, const std::vector<uint8_t>& payload,
                          const std::function<void(const Message&)>& on_reply) {
  auto& workers = remote_->workers;
  for (auto& l : workers) l->conn->send(type, payload);
  for (size_t i = 0; i < workers.size(); ++i) {
    Remote::Link& l = *workers[i];
    std::unique_lock<std::mutex> lock(l.mu);
    const bool got = l.cv.wait_for(lock, options_.timeout,
                                   [&] { return !l.replies.empty() || !l.failed.empty(); });
    CEILING_ENSURE(got, "tensor parallel: process {} did not answer within {} ms", i + 1,
                   options_.timeout.count());
    if (l.replies.empty()) fail("{}", l.failed);
    const Message m = std::move(l.replies.front());
    l.replies.pop_front();
    lock.unlock();
    on_reply(m);
  }
}

}  // namespace ceiling::dist
