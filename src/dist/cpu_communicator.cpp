#include "dist/cpu_communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "core/status.h"

namespace ceiling::dist {

namespace {

enum class Op { kAllReduce, kAllGather, kBroadcast, kBarrier };

const char* op_name(Op op) {
  switch (op) {
    case Op::kAllReduce:
      return "all_reduce_sum";
    case Op::kAllGather:
      return "all_gather";
    case Op::kBroadcast:
      return "broadcast";
    case Op::kBarrier:
      return "barrier";
  }
  return "?";
}

// What a rank posted for the current collective.
struct Call {
  Op op = Op::kBarrier;
  int64_t numel = 0;
  DType dtype = DType::kF32;
  int root = 0;
  const void* data = nullptr;
};

bool same(const Call& a, const Call& b) {
  return a.op == b.op && a.numel == b.numel && a.dtype == b.dtype && a.root == b.root;
}

std::string describe(const Call& c) {
  return fmt::format("{} of {} {}", op_name(c.op), c.numel, dtype_name(c.dtype));
}

void check_host(const TensorView& t, const char* what) {
  CEILING_ENSURE(t.device == Device::kCpu && t.is_contiguous() &&
                     (t.dtype == DType::kF32 || t.dtype == DType::kBF16),
                 "CpuCommunicator: {} must be a contiguous f32/bf16 host view (got {} {})", what,
                 dtype_name(t.dtype), t.shape_str());
}

}  // namespace

struct CpuGroup {
  int world = 1;
  std::chrono::milliseconds timeout{0};
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  uint64_t generation = 0;  // completed rendezvous
  bool failed = false;
  std::string why;
  std::vector<Call> calls;

  [[noreturn]] void throw_failed(int rank) {
    fail("tensor parallel rank {}: the group failed: {}", rank, why);
  }
  void fail_locked(const std::string& reason) {
    if (!failed) why = reason;
    failed = true;
    cv.notify_all();
  }

  // Sense-reversing barrier with a deadline; returns after every rank arrived.
  void rendezvous(std::unique_lock<std::mutex>& lock, int rank) {
    if (failed) throw_failed(rank);
    const uint64_t gen = generation;
    if (++arrived == world) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    if (!cv.wait_until(lock, deadline, [&] { return generation != gen || failed; }))
      fail_locked(fmt::format("rank {} waited {} ms for its peers (a peer died or hangs)", rank,
                              timeout.count()));
    if (failed) throw_failed(rank);
  }

  // Posts `call`, waits for every rank, checks the calls match; returns every rank's call.
  std::vector<Call> post(int rank, const Call& call) {
    std::unique_lock<std::mutex> lock(mu);
    if (failed) throw_failed(rank);
    calls[static_cast<size_t>(rank)] = call;
    rendezvous(lock, rank);
    std::vector<Call> all = calls;
    for (int r = 1; r < world; ++r)
      if (!same(all[0], all[static_cast<size_t>(r)]))
        fail_locked(fmt::format("mismatched collectives: rank 0 calls {}, rank {} calls {}",
                                describe(all[0]), r, describe(all[static_cast<size_t>(r)])));
    if (failed) throw_failed(rank);
    return all;
  }

  // Second rendezvous: every rank finished reading the posted buffers.
  void done(int rank) {
    std::unique_lock<std::mutex> lock(mu);
    rendezvous(lock, rank);
  }
};

CpuCommunicator::CpuCommunicator(std::shared_ptr<CpuGroup> group, int rank)
    : group_(std::move(group)), rank_(rank) {}
CpuCommunicator::~CpuCommunicator() = default;

int CpuCommunicator::world() const {
  return group_->world;
}

void CpuCommunicator::all_reduce_sum(const TensorView& x, void* /*stream*/) {
  check_host(x, "all_reduce_sum buffer");
  const auto all = group_->post(rank_, {Op::kAllReduce, x.numel(), x.dtype, 0, x.data});
  const size_t n = static_cast<size_t>(x.numel());
  std::vector<float> sum(n, 0.0f);
  for (const Call& c : all) {
    if (x.dtype == DType::kF32) {
      const float* p = static_cast<const float*>(c.data);
      for (size_t i = 0; i < n; ++i) sum[i] += p[i];
    } else {
      const uint16_t* p = static_cast<const uint16_t*>(c.data);
      for (size_t i = 0; i < n; ++i) sum[i] += bf16_to_f32(p[i]);
    }
  }
  group_->done(rank_);  // every rank has read every buffer: now overwrite ours
  if (x.dtype == DType::kF32) {
    std::copy(sum.begin(), sum.end(), x.as<float>());
  } else {
    uint16_t* p = x.as<uint16_t>();
    for (size_t i = 0; i < n; ++i) p[i] = f32_to_bf16(sum[i]);
  }
}

void CpuCommunicator::all_gather(const TensorView& in, const TensorView& out, void* /*stream*/) {
  check_host(in, "all_gather input");
  check_host(out, "all_gather output");
  CEILING_ENSURE(in.dtype == out.dtype && out.numel() == in.numel() * world(),
                 "CpuCommunicator::all_gather: output {} {} for input {} {} on {} ranks",
                 dtype_name(out.dtype), out.shape_str(), dtype_name(in.dtype), in.shape_str(),
                 world());
  const auto all = group_->post(rank_, {Op::kAllGather, in.numel(), in.dtype, 0, in.data});
  const size_t bytes = in.nbytes();
  for (size_t r = 0; r < all.size(); ++r)
    std::memmove(static_cast<char*>(out.data) + r * bytes, all[r].data, bytes);
  group_->done(rank_);
}

void CpuCommunicator::broadcast(const TensorView& x, int root, void* /*stream*/) {
  check_host(x, "broadcast buffer");
  CEILING_ENSURE(root >= 0 && root < world(), "CpuCommunicator::broadcast: root {} of {} ranks",
                 root, world());
  const auto all = group_->post(rank_, {Op::kBroadcast, x.numel(), x.dtype, root, x.data});
  if (rank_ != root) std::memcpy(x.data, all[static_cast<size_t>(root)].data, x.nbytes());
  group_->done(rank_);
}

void CpuCommunicator::barrier() {
  group_->post(rank_, {Op::kBarrier, 0, DType::kF32, 0, nullptr});
  group_->done(rank_);  // nobody posts the next call before every rank has read this one
}

void CpuCommunicator::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(group_->mu);
  group_->fail_locked(fmt::format("rank {}: {}", rank_, why));
}

std::vector<std::unique_ptr<engine::Communicator>> make_cpu_communicators(
    int world, std::chrono::milliseconds timeout) {
  CEILING_ENSURE(world >= 1, "tensor parallel: world size {} must be >= 1", world);
  auto group = std::make_shared<CpuGroup>();
  group->world = world;
  group->timeout = timeout;
  group->calls.resize(static_cast<size_t>(world));
  std::vector<std::unique_ptr<engine::Communicator>> out;
  for (int r = 0; r < world; ++r) out.push_back(std::make_unique<CpuCommunicator>(group, r));
  return out;
}

}  // namespace ceiling::dist
