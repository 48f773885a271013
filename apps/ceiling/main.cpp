// ceiling: an LLM inference engine that knows its own speed limit. This file is the process
// boundary: it parses the command line, runs one subcommand, and turns errors into one line on
// stderr and a non-zero exit code.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>

#include "ceiling/command.h"
#include "core/status.h"

namespace ceiling::cli {

std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

bool stderr_is_tty() { return isatty(fileno(stderr)) != 0; }

}  // namespace ceiling::cli

int main(int argc, char** argv) {
  using namespace ceiling::cli;
  CLI::App app{"ceiling — an LLM inference engine for NVIDIA GPUs that knows its own speed limit"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ceiling 0.1.0");

  auto commands = registry();
  std::sort(commands.begin(), commands.end(),
            [](const Command& a, const Command& b) { return a.order < b.order || (a.order == b.order && a.name < b.name); });
  std::function<int()> action;
  for (auto& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    auto run = c.setup(*sub);
    sub->callback([&action, run] { action = run; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return action ? action() : 0;
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
