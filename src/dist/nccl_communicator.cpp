#include "dist/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/check.h"
#include "core/status.h"
#include "kernels/cuda/all_reduce.h"

namespace ceiling::dist {

struct NcclState {
  ncclComm_t comm = nullptr;
  int device = 0;
  float* scratch = nullptr;  // [1] device: the barrier's all-reduce
  cudaStream_t stream = nullptr;
  // The one-shot P2P all-reduce (custom_max_bytes 0: off).
  size_t custom_max_bytes = 0;
  cuda::OneShotPeers peers;      // every rank's staging buffer and flags
  void* stage = nullptr;         // this rank's (owned)
  uint32_t* flags = nullptr;     // this rank's (owned)
  uint32_t* counters = nullptr;  // this rank's epoch counters (owned)
};

namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t nccl_dtype(DType t) {
  switch (t) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kF16:
      return ncclFloat16;
    default:
      fail("NcclCommunicator: dtype {} is not supported", dtype_name(t));
  }
}

void check_device_view(const TensorView& t, const char* what) {
  CEILING_ENSURE(t.device == Device::kCuda && t.is_contiguous(),
                 "NcclCommunicator: {} must be a contiguous device view (got {})", what,
                 t.shape_str());
}

// Polls until `comm` has no operation in progress; false on timeout. Throws on an NCCL error.
bool poll(ncclComm_t comm, Clock::time_point deadline, const char* what) {
  for (;;) {
    ncclResult_t r = ncclSuccess;
    CEILING_NCCL_CHECK(ncclCommGetAsyncError(comm, &r));
    if (r == ncclSuccess) return true;
    if (r != ncclInProgress) fail("NCCL {} failed: {}", what, ncclGetErrorString(r));
    if (Clock::now() > deadline) return false;
    std::this_thread::yield();
  }
}

}  // namespace

NcclCommunicator::NcclCommunicator(std::unique_ptr<NcclState> state, int rank, int world,
                                   std::chrono::milliseconds timeout)
    : state_(std::move(state)), rank_(rank), world_(world), timeout_(timeout) {}

NcclCommunicator::~NcclCommunicator() {
  int prev = 0;
  cudaGetDevice(&prev);
  cudaSetDevice(state_->device);
  // ncclCommAbort is local: unlike finalize + destroy it never waits for the peers, which are
  // torn down one after another on this one thread.
  if (state_->comm && !aborted_) ncclCommAbort(state_->comm);
  if (state_->scratch) cudaFree(state_->scratch);
  for (void* p :
       {state_->stage, static_cast<void*>(state_->flags), static_cast<void*>(state_->counters)})
    if (p) cudaFree(p);
  if (state_->stream) cudaStreamDestroy(state_->stream);
  cudaSetDevice(prev);
}

void NcclCommunicator::check_usable() const {
  CEILING_ENSURE(!aborted_, "tensor parallel rank {}: the NCCL group was aborted: {}", rank_, why_);
}

void NcclCommunicator::wait(const char* what) {
  if (!poll(state_->comm, Clock::now() + timeout_, what)) {
    abort(fmt::format("NCCL {} did not complete within {} ms", what, timeout_.count()));
    check_usable();
  }
}

std::string NcclCommunicator::name() const {
  return state_->custom_max_bytes ? fmt::format("nccl+custom<={}", state_->custom_max_bytes)
                                  : "nccl";
}

size_t NcclCommunicator::custom_max_bytes() const {
  return state_->custom_max_bytes;
}

void NcclCommunicator::all_reduce_sum(const TensorView& x, void* stream) {
  if (x.nbytes() <= state_->custom_max_bytes && (x.dtype == DType::kF32 || x.dtype == DType::kBF16))
    all_reduce_custom(x, stream);
  else
    all_reduce_nccl(x, stream);
}

void NcclCommunicator::all_reduce_custom(const TensorView& x, void* stream) {
  check_usable();
  check_device_view(x, "all_reduce_sum buffer");
  CEILING_ENSURE(x.nbytes() <= state_->custom_max_bytes,
                 "NcclCommunicator: {} bytes do not fit the custom all-reduce's {} (off: 0)",
                 x.nbytes(), state_->custom_max_bytes);
  cuda::one_shot_all_reduce(x.data, x.dtype, x.numel(), rank_, world_, state_->peers,
                            state_->counters, static_cast<cudaStream_t>(stream))
      .throw_if_error();
}

void NcclCommunicator::all_reduce_nccl(const TensorView& x, void* stream) {
  check_usable();
  check_device_view(x, "all_reduce_sum buffer");
  const ncclResult_t r =
      ncclAllReduce(x.data, x.data, static_cast<size_t>(x.numel()), nccl_dtype(x.dtype), ncclSum,
                    state_->comm, static_cast<cudaStream_t>(stream));
  if (r != ncclInProgress) CEILING_NCCL_CHECK(r);
  wait("all_reduce");
}

void NcclCommunicator::all_gather(const TensorView& in, const TensorView& out, void* stream) {
  check_usable();
  check_device_view(in, "all_gather input");
  check_device_view(out, "all_gather output");
  CEILING_ENSURE(in.dtype == out.dtype && out.numel() == in.numel() * world_,
                 "NcclCommunicator::all_gather: output {} for input {} on {} ranks",
                 out.shape_str(), in.shape_str(), world_);
  const ncclResult_t r =
      ncclAllGather(in.data, out.data, static_cast<size_t>(in.numel()), nccl_dtype(in.dtype),
                    state_->comm, static_cast<cudaStream_t>(stream));
  if (r != ncclInProgress) CEILING_NCCL_CHECK(r);
  wait("all_gather");
}

void NcclCommunicator::broadcast(const TensorView& x, int root, void* stream) {
  check_usable();
  check_device_view(x, "broadcast buffer");
  CEILING_ENSURE(root >= 0 && root < world_, "NcclCommunicator::broadcast: root {} of {} ranks",
                 root, world_);
  const ncclResult_t r =
      ncclBroadcast(x.data, x.data, static_cast<size_t>(x.numel()), nccl_dtype(x.dtype), root,
                    state_->comm, static_cast<cudaStream_t>(stream));
  if (r != ncclInProgress) CEILING_NCCL_CHECK(r);
  wait("broadcast");
}

void NcclCommunicator::barrier() {
  check_usable();
  const ncclResult_t r = ncclAllReduce(state_->scratch, state_->scratch, 1, ncclFloat32, ncclSum,
                                       state_->comm, state_->stream);
  if (r != ncclInProgress) CEILING_NCCL_CHECK(r);
  wait("barrier");
  // The host waits for the device, bounded: a peer that never joins ends in abort().
  const auto deadline = Clock::now() + timeout_;
  while (cudaStreamQuery(state_->stream) == cudaErrorNotReady) {
    if (Clock::now() > deadline) {
      abort(fmt::format("barrier did not complete within {} ms", timeout_.count()));
      check_usable();
    }
    std::this_thread::yield();
  }
  CEILING_CUDA_CHECK(cudaStreamQuery(state_->stream));
}

void NcclCommunicator::abort(const std::string& why) {
  if (aborted_.exchange(true)) return;
  why_ = why;
  ncclCommAbort(state_->comm);  // also ends this rank's kernels that wait for peers
}

namespace {

// The one-shot all-reduce's memory on every GPU, peers enabled; false (nothing kept) when some
// pair of GPUs has no P2P access.
bool setup_custom(std::vector<std::unique_ptr<NcclState>>& states, size_t max_bytes) {
  const int world = static_cast<int>(states.size());
  if (world > cuda::kOneShotMaxRanks) return false;
  for (int a = 0; a < world; ++a)
    for (int b = 0; b < world; ++b) {
      int ok = 0;
      if (a != b && (cudaDeviceCanAccessPeer(&ok, a, b) != cudaSuccess || !ok)) return false;
    }
  const size_t slot = (max_bytes + 15) / 16 * 16;  // 16-byte vector stores into every slot
  for (int r = 0; r < world; ++r) {
    NcclState& s = *states[static_cast<size_t>(r)];
    CEILING_CUDA_CHECK(cudaSetDevice(r));
    for (int q = 0; q < world; ++q) {
      if (q == r) continue;
      const cudaError_t e = cudaDeviceEnablePeerAccess(q, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();
      } else {
        CEILING_CUDA_CHECK(e);
      }
    }
    CEILING_CUDA_CHECK(cudaMalloc(&s.stage, cuda::one_shot_stage_bytes(slot, world)));
    // Zeroed: an LL word is read for its epoch (never 0) before any peer has written it.
    CEILING_CUDA_CHECK(cudaMemset(s.stage, 0, cuda::one_shot_stage_bytes(slot, world)));
    CEILING_CUDA_CHECK(cudaMalloc(&s.flags, cuda::kOneShotFlagWords * sizeof(uint32_t)));
    CEILING_CUDA_CHECK(cudaMalloc(&s.counters, cuda::kOneShotMaxBlocks * sizeof(uint32_t)));
    CEILING_CUDA_CHECK(cudaMemset(s.flags, 0, cuda::kOneShotFlagWords * sizeof(uint32_t)));
    CEILING_CUDA_CHECK(cudaMemset(s.counters, 0, cuda::kOneShotMaxBlocks * sizeof(uint32_t)));
  }
  for (int r = 0; r < world; ++r) {
    NcclState& s = *states[static_cast<size_t>(r)];
    for (int q = 0; q < world; ++q) {
      s.peers.stage[q] = states[static_cast<size_t>(q)]->stage;
      s.peers.flags[q] = states[static_cast<size_t>(q)]->flags;
    }
    s.peers.slot_bytes = static_cast<int64_t>(slot);
    s.custom_max_bytes = max_bytes;
    CEILING_CUDA_CHECK(cudaSetDevice(r));
    CEILING_CUDA_CHECK(cudaDeviceSynchronize());  // the memsets, before any peer reads
  }
  return true;
}

}  // namespace

NcclId nccl_unique_id() {
  ncclUniqueId id;
  CEILING_NCCL_CHECK(ncclGetUniqueId(&id));
  NcclId out;
  static_assert(sizeof(id) == sizeof(out.bytes));
  std::memcpy(out.bytes.data(), &id, sizeof(id));
  return out;
}

std::vector<std::unique_ptr<engine::Communicator>> make_nccl_communicators(
    int world, std::chrono::milliseconds timeout, size_t custom_max_bytes) {
  return make_nccl_communicators(world, 0, world, nccl_unique_id(), timeout, custom_max_bytes);
}

std::vector<std::unique_ptr<engine::Communicator>> make_nccl_communicators(
    int world, int first, int local, const NcclId& unique_id, std::chrono::milliseconds timeout,
    size_t custom_max_bytes) {
  int count = 0;
  const cudaError_t ce = cudaGetDeviceCount(&count);
  CEILING_ENSURE(ce == cudaSuccess && local >= 1 && local <= count,
                 "--tensor-parallel-size {} needs {} GPUs {}; it has {}{}", world, local,
                 local == world ? "on this machine" : "in this process",
                 ce == cudaSuccess ? count : 0,
                 ce == cudaSuccess ? "" : fmt::format(" ({})", cudaGetErrorString(ce)));
  CEILING_ENSURE(first >= 0 && first + local <= world, "NCCL ranks [{}, {}) of {}", first,
                 first + local, world);
  // NVLink SHARP (multicast objects) stays off; the other defaults are NCCL's own.
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  int prev = 0;
  CEILING_CUDA_CHECK(cudaGetDevice(&prev));
  ncclUniqueId id;
  std::memcpy(&id, unique_id.bytes.data(), sizeof(id));
  std::vector<std::unique_ptr<NcclState>> states;
  for (int r = 0; r < local; ++r) {
    states.push_back(std::make_unique<NcclState>());
    states.back()->device = r;
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  CEILING_NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < local; ++r) {
    CEILING_CUDA_CHECK(cudaSetDevice(r));
    const ncclResult_t res = ncclCommInitRankConfig(&states[static_cast<size_t>(r)]->comm, world,
                                                    id, first + r, &config);
    if (res != ncclInProgress) CEILING_NCCL_CHECK(res);
  }
  const ncclResult_t end = ncclGroupEnd();
  if (end != ncclInProgress) CEILING_NCCL_CHECK(end);
  const auto deadline = Clock::now() + timeout;
  for (int r = 0; r < local; ++r) {
    if (!poll(states[static_cast<size_t>(r)]->comm, deadline, "init")) {
      for (auto& s : states)
        if (s->comm) ncclCommAbort(s->comm);
      cudaSetDevice(prev);
      fail("NCCL start-up of {} ranks did not finish within {} ms", world, timeout.count());
    }
  }
  // The one-shot kernel reads its peers' memory directly: only when every rank is in this
  // process.
  if (custom_max_bytes > 0 && world > 1 && local == world) setup_custom(states, custom_max_bytes);
  std::vector<std::unique_ptr<engine::Communicator>> out;
  for (int r = 0; r < local; ++r) {
    NcclState& s = *states[static_cast<size_t>(r)];
    CEILING_CUDA_CHECK(cudaSetDevice(r));
    CEILING_CUDA_CHECK(cudaMalloc(&s.scratch, sizeof(float)));
    CEILING_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    out.push_back(std::make_unique<NcclCommunicator>(std::move(states[static_cast<size_t>(r)]),
                                                     first + r, world, timeout));
  }
  CEILING_CUDA_CHECK(cudaSetDevice(prev));
  return out;
}

}  // namespace ceiling::dist
