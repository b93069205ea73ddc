#pragma once
// Runs the attnkit executable (ATTNKIT_CLI_PATH) with arguments and captures its exit
// status, stdout and stderr separately.

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace attnkit::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// `args` is appended to the command line as is (quote values that need it); `env` is
// prefixed (e.g. "ATTNKIT_ATTENTION_BACKEND=REFERENCE"); `shell` runs first in the same
// shell (e.g. "ulimit -v 4000000;") and `wrapper` precedes the executable (e.g.
// "timeout 60").
inline CliResult run_cli(const std::string& args, const std::string& env = "",
                         const std::string& shell = "", const std::string& wrapper = "") {
  char err_path[] = "/tmp/attnkit_cli_stderr_XXXXXX";
  const int fd = mkstemp(err_path);
  if (fd >= 0) close(fd);
  const std::string command = shell + (env.empty() ? "" : " env " + env) + " " + wrapper + " " +
                              std::string(ATTNKIT_CLI_PATH) + " " + args + " 2>" + err_path;
  CliResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.out.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream err_file(err_path);
  std::stringstream err;
  err << err_file.rdbuf();
  result.err = err.str();
  std::remove(err_path);
  return result;
}

}  // namespace attnkit::testing
