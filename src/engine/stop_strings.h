// Stop strings over streamed text. Text arrives in pieces (decoded tokens); the matcher emits
// only text that can no longer become part of a stop string: it holds back the longest tail that
// is a prefix of some stop string, and on a match emits the text before the match and stops.
// The stop string itself (and anything after it) is never emitted.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ceiling::engine {

class StopStringMatcher {
 public:
  // Empty stop strings are ignored.
  explicit StopStringMatcher(std::vector<std::string> stops);

  // Adds `piece`; returns the text that is now safe to emit (possibly empty). After a match,
  // stopped() is true and later pushes return "".
  std::string push(std::string_view piece);
  // End of generation without a match: returns the held-back text.
  std::string flush();

  bool stopped() const { return stopped_; }
  // The stop string that matched (empty when none did).
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace ceiling::engine
