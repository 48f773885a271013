// The control plane of a multi-process tensor-parallel group (issue #17): one TCP connection
// from each worker process to process 0 (MASTER_ADDR:MASTER_PORT), carrying the start-up
// handshake (the group's shape, a fingerprint of the model, NCCL's unique id) and then one
// message per step (the StepBatch) and per group call (init, device memory, stop). Tensors never
// travel here: the collectives are NCCL's, which bootstraps its own transport from the unique id.
//
// Framing: [u32 magic][u32 type][u64 length][payload]; integers little-endian as the host has
// them (every process runs the same binary on the same architecture). A peer that closes, a bad
// frame or a wait past its deadline throws ceiling::Error naming the peer.
//
// Thread-safety: send() from one thread at a time per connection; recv() likewise.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/forward.h"
#include "engine/step_batch.h"

namespace ceiling::dist {

enum class MsgType : uint32_t {
  kHello = 1,    // worker -> 0: Hello
  kWelcome,      // 0 -> worker: the NCCL unique id (or kError: refused)
  kInit,         // 0 -> worker: Init; reply kOk or kError
  kMemory,       // 0 -> worker: empty; reply kMemoryReply
  kMemoryReply,  // worker -> 0: u64 free, u64 total, u8 has
  kStep,         // 0 -> worker: a StepBatch; no reply (a failure comes back as kError)
  kStop,         // 0 -> worker: leave the loop
  kOk,
  kError,  // either way: a one-line reason
};

struct Message {
  MsgType type = MsgType::kOk;
  std::vector<uint8_t> payload;
};

// What a worker process says about itself; process 0 checks it against its own.
struct Hello {
  int process = 0;           // RANK
  int processes = 0;         // WORLD_SIZE
  int world = 0;             // --tensor-parallel-size
  int local_ranks = 0;       // GPUs this process drives
  uint64_t fingerprint = 0;  // the model config (model_fingerprint)
  std::string model;         // its name, for the error
};

struct InitMsg {
  engine::ForwardLimits limits;
  int num_blocks = 0, block_size = 0;
};

// One connected socket (owned; closed by the destructor).
class Connection {
 public:
  explicit Connection(int fd, std::string peer);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void send(MsgType type, const std::vector<uint8_t>& payload = {});
  // Blocks until a whole message arrives (no deadline: the caller's watchdog ends the wait with
  // shutdown()). Throws when the peer closes or sends a bad frame.
  Message recv();
  // Like recv, but throws when nothing arrives within `timeout`.
  Message recv_within(std::chrono::milliseconds timeout);
  // Wakes a thread blocked in recv (it throws); the connection is unusable afterwards.
  void shutdown();
  const std::string& peer() const { return peer_; }

 private:
  void read_exact(void* dst, size_t n, int timeout_ms);
  int fd_;
  std::string peer_;
};

// Process 0: listens on addr:port and accepts `count` workers, each within the deadline.
std::vector<std::unique_ptr<Connection>> accept_workers(const std::string& addr, int port,
                                                        int count,
                                                        std::chrono::milliseconds timeout);
// A worker: connects to addr:port, retrying until the deadline (process 0 may start later).
std::unique_ptr<Connection> connect_to_master(const std::string& addr, int port,
                                              std::chrono::milliseconds timeout);

// Payload codecs (round trips tested in tests/dist).
std::vector<uint8_t> encode(const Hello& h);
Hello decode_hello(const std::vector<uint8_t>& p);
std::vector<uint8_t> encode(const InitMsg& m);
InitMsg decode_init(const std::vector<uint8_t>& p);
std::vector<uint8_t> encode(const engine::StepBatch& s);
engine::StepBatch decode_step(const std::vector<uint8_t>& p);
std::vector<uint8_t> encode_text(const std::string& s);
std::string decode_text(const std::vector<uint8_t>& p);

}  // namespace ceiling::dist
