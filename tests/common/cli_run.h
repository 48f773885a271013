// Runs the built `ceiling` binary for CLI tests: exit code, stdout and stderr of one command line.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace ceiling::cli_test {

struct CliResult {
  int code = -1;    // exit code; -1 when killed by a signal
  std::string out;  // stdout
  std::string err;  // stderr
};

// `bin args` through the shell; stderr goes through a temp file named after `tag`.
inline CliResult run_cli(const std::string& bin, const std::string& args, const std::string& tag) {
  const std::string err_file = ::testing::TempDir() + "ceiling_" + tag + "_err.txt";
  const std::string cmd = bin + " " + args + " 2>" + err_file;
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (FILE* e = fopen(err_file.c_str(), "r")) {
    while ((n = fread(buf.data(), 1, buf.size(), e)) > 0) r.err.append(buf.data(), n);
    fclose(e);
  }
  return r;
}

}  // namespace ceiling::cli_test
