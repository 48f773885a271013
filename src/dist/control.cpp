#include "dist/control.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/status.h"

namespace ceiling::dist {
namespace {

constexpr uint32_t kMagic = 0x43454c31;              // "CEL1"
constexpr uint64_t kMaxPayload = uint64_t{1} << 30;  // a StepBatch is far smaller
using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return ms < 0 ? 0 : static_cast<int>(std::min<int64_t>(ms, 1 << 30));
}

// getaddrinfo for addr:port (IPv4 or IPv6, TCP); throws naming the address.
addrinfo* resolve(const std::string& addr, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(addr.empty() ? nullptr : addr.c_str(), service.c_str(), &hints, &res);
  CEILING_ENSURE(rc == 0 && res != nullptr, "MASTER_ADDR {}:{}: cannot resolve ({})", addr, port,
                 gai_strerror(rc));
  return res;
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Little-endian-as-host byte writer / reader for the payloads.
struct Writer {
  std::vector<uint8_t> out;
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof(T));
  }
  void put_ints(const std::vector<int32_t>& v) {
    put<uint64_t>(v.size());
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    out.insert(out.end(), p, p + v.size() * sizeof(int32_t));
  }
  void put_text(const std::string& s) {
    put<uint64_t>(s.size());
    out.insert(out.end(), s.begin(), s.end());
  }
};

struct Reader {
  const std::vector<uint8_t>& in;
  size_t at = 0;
  const char* what;
  void need(size_t n) const {
    CEILING_ENSURE(n <= in.size() - at, "control message {}: truncated at byte {} of {}", what, at,
                   in.size());
  }
  template <typename T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, in.data() + at, sizeof(T));
    at += sizeof(T);
    return v;
  }
  std::vector<int32_t> get_ints() {
    const uint64_t n = get<uint64_t>();
    CEILING_ENSURE(n <= (in.size() - at) / sizeof(int32_t),
                   "control message {}: truncated ({} ints announced, {} bytes left)", what, n,
                   in.size() - at);
    std::vector<int32_t> v(n);
    std::memcpy(v.data(), in.data() + at, n * sizeof(int32_t));
    at += n * sizeof(int32_t);
    return v;
  }
  std::string get_text() {
    const uint64_t n = get<uint64_t>();
    need(n);
    std::string s(reinterpret_cast<const char*>(in.data() + at), n);
    at += n;
    return s;
  }
  void done() const {
    CEILING_ENSURE(at == in.size(), "control message {}: {} trailing bytes", what, in.size() - at);
  }
};

}  // namespace

Connection::Connection(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {
  set_nodelay(fd_);
}

Connection::~Connection() {
  if (fd_ >= 0) close(fd_);
}

void Connection::shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void Connection::send(MsgType type, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> frame(16 + payload.size());
  const uint32_t head[2] = {kMagic, static_cast<uint32_t>(type)};
  const uint64_t len = payload.size();
  std::memcpy(frame.data(), head, 8);
  std::memcpy(frame.data() + 8, &len, 8);
  if (!payload.empty()) std::memcpy(frame.data() + 16, payload.data(), payload.size());
  size_t done = 0;
  while (done < frame.size()) {
    const ssize_t n = ::send(fd_, frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    CEILING_ENSURE(n > 0, "tensor parallel control: sending to {} failed ({})", peer_,
                   std::strerror(errno));
    done += static_cast<size_t>(n);
  }
}

void Connection::read_exact(void* dst, size_t n, int timeout_ms) {
  auto* p = static_cast<uint8_t*>(dst);
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (n > 0) {
    if (timeout_ms >= 0) {
      pollfd pfd{fd_, POLLIN, 0};
      const int rc = poll(&pfd, 1, remaining_ms(deadline));
      if (rc < 0 && errno == EINTR) continue;
      CEILING_ENSURE(rc > 0, "tensor parallel control: nothing from {} within {} ms", peer_,
                     timeout_ms);
    }
    const ssize_t got = ::recv(fd_, p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    CEILING_ENSURE(got > 0, "tensor parallel control: {} {}", peer_,
                   got == 0 ? "closed the connection (its process ended)"
                            : fmt::format("failed ({})", std::strerror(errno)));
    p += got;
    n -= static_cast<size_t>(got);
  }
}

Message Connection::recv_within(std::chrono::milliseconds timeout) {
  const int ms = static_cast<int>(timeout.count());
  uint32_t head[2];
  uint64_t len = 0;
  read_exact(head, 8, ms);
  read_exact(&len, 8, ms);
  CEILING_ENSURE(head[0] == kMagic && len <= kMaxPayload,
                 "tensor parallel control: a bad frame from {} (not a ceiling process of this "
                 "version?)",
                 peer_);
  Message m;
  m.type = static_cast<MsgType>(head[1]);
  m.payload.resize(len);
  if (len) read_exact(m.payload.data(), len, ms);
  return m;
}

Message Connection::recv() {
  return recv_within(std::chrono::milliseconds(-1));
}

std::vector<std::unique_ptr<Connection>> accept_workers(const std::string& addr, int port,
                                                        int count,
                                                        std::chrono::milliseconds timeout) {
  addrinfo* res = resolve(addr, port, true);
  int fd = -1;
  std::string why = "no address";
  for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, count + 4) != 0) {
      why = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  CEILING_ENSURE(fd >= 0, "MASTER_ADDR {}:{}: process 0 cannot listen there ({})", addr, port, why);
  std::vector<std::unique_ptr<Connection>> out;
  const auto deadline = Clock::now() + timeout;
  while (static_cast<int>(out.size()) < count) {
    pollfd pfd{fd, POLLIN, 0};
    const int rc = poll(&pfd, 1, remaining_ms(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) {
      close(fd);
      fail(
          "MASTER_ADDR {}:{}: {} of {} worker processes connected within {} ms (start one "
          "process per RANK 1..{} with the same MASTER_ADDR/MASTER_PORT)",
          addr, port, out.size(), count, timeout.count(), count);
    }
    sockaddr_storage ss{};
    socklen_t sl = sizeof(ss);
    const int c = accept(fd, reinterpret_cast<sockaddr*>(&ss), &sl);
    if (c < 0) continue;
    char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
    getnameinfo(reinterpret_cast<sockaddr*>(&ss), sl, host, sizeof(host), serv, sizeof(serv),
                NI_NUMERICHOST | NI_NUMERICSERV);
    out.push_back(std::make_unique<Connection>(c, fmt::format("{}:{}", host, serv)));
  }
  close(fd);
  return out;
}

std::unique_ptr<Connection> connect_to_master(const std::string& addr, int port,
                                              std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::string why;
  for (;;) {
    addrinfo* res = resolve(addr, port, false);
    for (addrinfo* a = res; a; a = a->ai_next) {
      const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd < 0) continue;
      if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        freeaddrinfo(res);
        return std::make_unique<Connection>(fd, fmt::format("process 0 at {}:{}", addr, port));
      }
      why = std::strerror(errno);
      close(fd);
    }
    freeaddrinfo(res);
    CEILING_ENSURE(Clock::now() < deadline,
                   "MASTER_ADDR {}:{}: process 0 did not accept a connection within {} ms ({})",
                   addr, port, timeout.count(), why);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::vector<uint8_t> encode(const Hello& h) {
  Writer w;
  w.put<int32_t>(h.process);
  w.put<int32_t>(h.processes);
  w.put<int32_t>(h.world);
  w.put<int32_t>(h.local_ranks);
  w.put<uint64_t>(h.fingerprint);
  w.put_text(h.model);
  return w.out;
}

Hello decode_hello(const std::vector<uint8_t>& p) {
  Reader r{p, 0, "hello"};
  Hello h;
  h.process = r.get<int32_t>();
  h.processes = r.get<int32_t>();
  h.world = r.get<int32_t>();
  h.local_ranks = r.get<int32_t>();
  h.fingerprint = r.get<uint64_t>();
  h.model = r.get_text();
  r.done();
  return h;
}

std::vector<uint8_t> encode(const InitMsg& m) {
  Writer w;
  w.put<int32_t>(m.limits.max_tokens);
  w.put<int32_t>(m.limits.max_logits_rows);
  w.put<int32_t>(m.num_blocks);
  w.put<int32_t>(m.block_size);
  return w.out;
}

InitMsg decode_init(const std::vector<uint8_t>& p) {
  Reader r{p, 0, "init"};
  InitMsg m;
  m.limits.max_tokens = r.get<int32_t>();
  m.limits.max_logits_rows = r.get<int32_t>();
  m.num_blocks = r.get<int32_t>();
  m.block_size = r.get<int32_t>();
  r.done();
  return m;
}

std::vector<uint8_t> encode(const engine::StepBatch& s) {
  Writer w;
  w.put_ints(s.token_ids);
  w.put_ints(s.positions);
  w.put_ints(s.slot_mapping);
  w.put_ints(s.query_start);
  w.put_ints(s.seq_lens);
  w.put<int32_t>(s.max_blocks);
  w.put_ints(s.block_tables);
  w.put_ints(s.logits_rows);
  return w.out;
}

engine::StepBatch decode_step(const std::vector<uint8_t>& p) {
  Reader r{p, 0, "step"};
  engine::StepBatch s;
  s.token_ids = r.get_ints();
  s.positions = r.get_ints();
  s.slot_mapping = r.get_ints();
  s.query_start = r.get_ints();
  s.seq_lens = r.get_ints();
  s.max_blocks = r.get<int32_t>();
  s.block_tables = r.get_ints();
  s.logits_rows = r.get_ints();
  r.done();
  return s;
}

std::vector<uint8_t> encode_text(const std::string& s) {
  Writer w;
  w.put_text(s);
  return w.out;
}

std::string decode_text(const std::vector<uint8_t>& p) {
  Reader r{p, 0, "text"};
  std::string s = r.get_text();
  r.done();
  return s;
}

}  // namespace ceiling::dist
