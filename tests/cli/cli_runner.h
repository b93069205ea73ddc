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
// prefixed (e.g. "ATTNKIT_ATTENTION_BACKEND=REFERENCE").
inline CliResult run_cli(const std::string& args, const std::string& env = "") {
  char err_path[] = "/tmp/attnkit_cli_stderr_XXXXXX";
  const int fd = mkstemp(err_path);
  if (fd >= 0) close(fd);
  const std::string command = (env.empty() ? "" : "env " + env + " ") +
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
