// Subcommand registry: each cmd_*.cpp file registers one subcommand with CEILING_COMMAND.
// Handlers return the process exit code; they throw ceiling::Error for bad input, which main()
// prints as one line ("error: ...") with exit code 1.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace ceiling::cli {

struct Command {
  std::string name;
  std::string help;
  // Adds the subcommand's options to `sub` and returns the action to run after parsing.
  std::function<std::function<int()>(CLI::App& sub)> setup;
  int order = 100;  // position in --help
};

std::vector<Command>& registry();

struct Registrar {
  explicit Registrar(Command c) { registry().push_back(std::move(c)); }
};

// True when stdout/stderr is a terminal (progress bars, colours).
bool stderr_is_tty();

// Thrown by a tensor-parallel worker process (RANK > 0, dist/launch.h) when the driver stopped
// the group: the command is over and exits 0 without doing its own work.
struct WorkerFinished {};

// Now, UTC, as ISO 8601 ("2026-11-25T20:43:00Z"): the time stamp of result files.
std::string utc_now();

// The commit this binary runs from (bench/run_info.h with the CUDA bench library; else
// $CEILING_GIT_SHA or "unknown"): the provenance of result files.
std::string git_sha();

}  // namespace ceiling::cli

#define CEILING_COMMAND_CAT2(a, b) a##b
#define CEILING_COMMAND_CAT(a, b) CEILING_COMMAND_CAT2(a, b)
#define CEILING_COMMAND(...)                            \
  static ::ceiling::cli::Registrar CEILING_COMMAND_CAT( \
      ceiling_cmd_, __LINE__)(::ceiling::cli::Command{__VA_ARGS__})
