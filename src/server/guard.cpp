#include "server/guard.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <filesystem>

namespace ceiling::server {
namespace {

bool same_text(std::string_view a, std::string_view b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned>(a[i]) ^ static_cast<unsigned>(i < b.size() ? b[i] : 0);
  return diff == 0;
}

// "ip", port of a socket address.
bool address_of(const sockaddr_storage& ss, std::string& ip, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
    if (!inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf)) return false;
    port = ntohs(a.sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(ss);
    if (!inet_ntop(AF_INET6, &a.sin6_addr, buf, sizeof buf)) return false;
    port = ntohs(a.sin6_port);
  } else {
    return false;
  }
  ip = buf;
  return true;
}

}  // namespace

bool authorized(const httplib::Request& req, const std::string& api_key) {
  if (api_key.empty()) return true;
  const std::string h = req.get_header_value("Authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (h.size() < kBearer.size() || h.compare(0, kBearer.size(), kBearer) != 0) return false;
  return same_text(std::string_view(h).substr(kBearer.size()), api_key);
}

bool Admission::try_take(int n) {
  int cur = count_.load();
  do {
    if (cur + n > limit_) return false;
  } while (!count_.compare_exchange_weak(cur, cur + n));
  return true;
}

int connection_socket(const httplib::Request& req) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    int fd = -1;
    try {
      fd = std::stoi(entry.path().filename().string());
    } catch (const std::exception&) {
      continue;
    }
    sockaddr_storage local{}, peer{};
    socklen_t ll = sizeof local, pl = sizeof peer;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0) continue;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) continue;
    std::string lip, pip;
    int lport = 0, pport = 0;
    if (!address_of(local, lip, lport) || !address_of(peer, pip, pport)) continue;
    if (lport == req.local_port && pport == req.remote_port && pip == req.remote_addr &&
        lip == req.local_addr)
      return fd;
  }
  return -1;
}

bool peer_closed(int fd) {
  if (fd < 0) return false;
  char c;
  const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;  // more data (a pipelined request): still there
  if (n == 0) return true;  // orderly close
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

}  // namespace ceiling::server
