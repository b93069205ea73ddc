#pragma once
// Runs the built `attnkit` binary (ATTNKIT_CLI_PATH) through the shell and captures its
// exit status, stdout and stderr separately.

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace attnkit::testing {

struct CliResult {
  int status = -1;
  std::string out;
  std::string err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `env` holds "NAME=value" assignments for the command only. ATTNKIT_ATTENTION_BACKEND is
// always cleared first so that the caller's environment cannot leak in.
inline CliResult run_cli(const std::vector<std::string>& args,
                         const std::vector<std::string>& env = {}) {
  static int counter = 0;
  const auto base = std::filesystem::temp_directory_path() /
                    ("attnkit_cli_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  // Appends, never "literal" + string: GCC 12 warns (-Wrestrict) on the latter, wrongly.
  std::string cmd = "env -u ATTNKIT_ATTENTION_BACKEND";
  auto word = [&cmd](const std::string& w) {
    cmd.push_back(' ');
    cmd.append(shell_quote(w));
  };
  for (const std::string& e : env) word(e);
  word(ATTNKIT_CLI_PATH);
  for (const std::string& a : args) word(a);
  cmd.append(" >");
  cmd.append(shell_quote(base.string() + ".out"));
  cmd.append(" 2>");
  cmd.append(shell_quote(base.string() + ".err"));
  const int raw = std::system(cmd.c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(base.string() + ".out");
  r.err = slurp(base.string() + ".err");
  std::filesystem::remove(base.string() + ".out");
  std::filesystem::remove(base.string() + ".err");
  return r;
}

}  // namespace attnkit::testing
