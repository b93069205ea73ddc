#pragma once
// The attnkit sub-commands. Each lives in its own file (cli/<cmd>_command.cpp), adds itself
// to the application with add_<cmd>_command(), and is called once from cli/main.cpp.
// A command reports user errors by throwing attnkit::Error; main() prints the message to
// stderr and exits non-zero.

#include <CLI/CLI.hpp>

namespace attnkit::cli {

// attnkit backends [--platform P] [--json]: registered backends, their capabilities and
// whether this binary can run them on the platform.
void add_backends_command(CLI::App& app);

// attnkit bench --backend NAME --heads Q/KV --head-size D --batch B --context L
// [--query-len N] [--causal] [--sinks] [--kv-cache-dtype T] [--block-size S] [--threads N]
// [--json]: times one shape and reports it against this machine's measured ceilings.
void add_bench_command(CLI::App& app);

// attnkit explain --model PATH|NAME [--platform P] [--dtype D] [--kv-cache-dtype D]
// [--block-size N] [--attention-backend NAME] [--attention-config JSON|@FILE] [--json]:
// every layer's kind and chosen backend (and why), and the KV-cache groups.
void add_explain_command(CLI::App& app);

// attnkit run [--model M] [--requests N] [--prompt-len MIN:MAX] [--verify] [--json] ...:
// drives real steps through the selected backends and reports what ran.
void add_run_command(CLI::App& app);

// attnkit tune --model M [--platform P] [--dtype D] [--kv-cache-dtype D] [--repeats N]
// [--tuning-cache FILE] [--json]: times every valid backend of each distinct attention
// layer on this device and stores the times for "tuned" choices.
void add_tune_command(CLI::App& app);

// attnkit conformance --backend NAME [--full] [--json]: checks a backend against REFERENCE
// over the cases its capabilities declare; exits non-zero when one fails.
void add_conformance_command(CLI::App& app);

}  // namespace attnkit::cli
