// ceiling: an LLM inference engine that knows its own speed limit. This file is the process
// boundary: it parses the command line, runs one subcommand, and turns errors into one line on
// stderr and a non-zero exit code: 2 for bad usage (an unknown subcommand or option, a value
// CLI11 cannot parse), 1 for every other error (ceiling::Error and the rest).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <functional>
#include <string>

#include "ceiling/command.h"
#include "core/status.h"
#ifdef HAVE_CEILING_BENCH
#include "bench/run_info.h"
#endif

namespace ceiling::cli {

std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

bool stderr_is_tty() {
  return isatty(fileno(stderr)) != 0;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string git_sha() {
#ifdef HAVE_CEILING_BENCH
  return bench::git_sha();
#else
  const char* env = std::getenv("CEILING_GIT_SHA");
  return env && *env ? env : "unknown";
#endif
}

namespace {

constexpr int kUsageExit = 2;

// One line for a CLI11 parse error. A first argument that is not an option and names no
// subcommand gets "unknown subcommand 'x'" with the list (CLI11 would say "A subcommand is
// required"); other errors keep CLI11's message and point at --help.
int usage_error(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  const std::string first = argc > 1 ? argv[1] : "";
  std::string names;
  bool known = false;
  for (const CLI::App* sub : app.get_subcommands(std::function<bool(const CLI::App*)>{})) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
    known = known || sub->get_name() == first;
  }
  std::fflush(stdout);
  if (!first.empty() && first[0] != '-' && !known) {
    fmt::print(stderr, "error: unknown subcommand '{}' (subcommands: {})\n", first, names);
  } else if (!first.empty() && first[0] == '-' && dynamic_cast<const CLI::RequiredError*>(&e)) {
    fmt::print(
        stderr,
        "error: unknown option '{}' (usage: ceiling SUBCOMMAND [OPTIONS]; subcommands: {})\n",
        first, names);
  } else if (argc < 2) {
    fmt::print(stderr, "error: a subcommand is required ({}); see ceiling --help\n", names);
  } else {
    const std::string help = first[0] == '-' ? "ceiling --help" : "ceiling " + first + " --help";
    fmt::print(stderr, "error: {}; see {}\n", e.what(), help);
  }
  return kUsageExit;
}

}  // namespace

}  // namespace ceiling::cli

int main(int argc, char** argv) {
  using namespace ceiling::cli;
  CLI::App app{"ceiling — an LLM inference engine for NVIDIA GPUs that knows its own speed limit"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ceiling 0.1.0");

  auto commands = registry();
  std::sort(commands.begin(), commands.end(), [](const Command& a, const Command& b) {
    return a.order < b.order || (a.order == b.order && a.name < b.name);
  });
  std::function<int()> action;
  for (auto& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    auto run = c.setup(*sub);
    sub->callback([&action, run] { action = run; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage_error(app, e, argc, argv);
  }
  try {
    return action ? action() : 0;
  } catch (const WorkerFinished&) {
    return 0;
  } catch (const ceiling::Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
