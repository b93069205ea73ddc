#pragma once
// The schema version every JSON document of attnkit carries as "schema_version": the
// `--json` output of each command and the library's to_json() of a whole report
// (explain, run, conformance). docs/json.md explains the rule and docs/schemas/ holds the
// JSON Schema of each document.

namespace attnkit {

// Changes when a field is removed or renamed, or changes type or meaning; adding a field
// does not change it, so programs must ignore fields they do not know.
inline constexpr int kJsonSchemaVersion = 1;

}  // namespace attnkit
