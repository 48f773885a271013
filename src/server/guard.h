// Who may come in and how many: the API key check and the admission count that turns excess
// requests into 429s, plus the peer-disconnect probe the routes poll while a request waits.
// All thread-safe.
#pragma once

#include <atomic>
#include <string>
#include <string_view>

namespace httplib {
struct Request;
}

namespace ceiling::server {

// True when no key is configured, or the request carries `Authorization: Bearer <key>`.
// Compares in time independent of where the strings differ.
bool authorized(const httplib::Request& req, const std::string& api_key);

// Engine requests admitted and not finished, capped at `limit`.
class Admission {
 public:
  explicit Admission(int limit) : limit_(limit) {}
  // Takes n slots, or none and returns false when that would pass the limit.
  bool try_take(int n);
  void release(int n) { count_.fetch_sub(n); }
  int count() const { return count_.load(); }

 private:
  int limit_;
  std::atomic<int> count_{0};
};

// The socket of the connection `req` came on (matched by its local and remote address and port),
// or -1 when it cannot be found. Linux: scans /proc/self/fd.
int connection_socket(const httplib::Request& req);
// True when the peer has closed the connection (or it failed); false while it is open or fd < 0.
bool peer_closed(int fd);

}  // namespace ceiling::server
