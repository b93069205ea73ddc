#!/usr/bin/env python3
"""Every --json output of the attnkit CLI, from real runs, against its JSON Schema in
docs/schemas/ (run by ctest as json_schema_test).

Usage: json_schema_test.py ATTNKIT_CLI [unittest options]

The schemas leave records open ("additionalProperties": true) so that a later release with
the same schema_version, which may add fields, still validates. Here every document is
checked against the schemas closed (every such true made false), so a field the output
carries that the schema does not name fails the test: the schema lists every field."""

import copy
import json
import pathlib
import subprocess
import sys
import unittest

REPO = pathlib.Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "docs" / "schemas"
MODELS = sorted((REPO / "models").glob("*.json"))
# Models no CUDA backend serves yet, and the reason explain gives: the state backends run
# on the CPU only, and no CUDA kernel takes Gemma-4's 512-wide full-attention heads.
CUDA_UNSERVED = {
    "jamba-v0.1": "MAMBA1: runs on cpu, not on cuda:9.0",
    "nemotron-h-56b-base-8k": "MAMBA2: runs on cpu, not on cuda:9.0",
    "qwen3-next-80b-a3b-thinking": "GDN_ATTN: runs on cpu, not on cuda:9.0",
    "gemma-4-26b-a4b": "head_size 512 not supported",
}
SCHEMA_VERSION = 1
CLI = None  # set from argv in main

try:
    import jsonschema
    from jsonschema import Draft202012Validator
except ImportError:  # pragma: no cover - the message is the point
    sys.exit("json_schema_test: needs Python's jsonschema (Debian: python3-jsonschema, "
             "installed by scripts/install-deps.sh)")


def closed(schema):
    """The schema with every open record closed: additionalProperties true -> false."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if node.get("additionalProperties") is True:
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


def load_schema(name):
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    return schema


def run_cli(*args):
    """Runs the CLI with --json; returns the parsed stdout (stdout must be only JSON)."""
    r = subprocess.run([CLI, *args, "--json"], capture_output=True, text=True, timeout=300,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise AssertionError(f"attnkit {' '.join(args)} --json exited {r.returncode}:\n"
                             f"{r.stdout}\n{r.stderr}")
    return json.loads(r.stdout)


def errors(validator, document):
    return sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
                  for e in validator.iter_errors(document))


class SchemaCase(unittest.TestCase):
    name = None  # the schema's name, e.g. "backends"

    @classmethod
    def setUpClass(cls):
        cls.schema = load_schema(cls.name)
        cls.open_validator = Draft202012Validator(cls.schema)
        cls.validator = Draft202012Validator(closed(cls.schema))

    def assert_valid(self, document, what):
        found = errors(self.validator, document)
        self.assertEqual(found, [], f"{what} does not match {self.name}.schema.json")
        self.assertIs(type(document["schema_version"]), int, what)
        self.assertEqual(document["schema_version"], SCHEMA_VERSION, what)

    def assert_invalid(self, document, what):
        self.assertNotEqual(errors(self.validator, document), [],
                            f"{what} passed {self.name}.schema.json")

    def assert_wrong_documents_fail(self, document):
        """Breaks a valid document in ways a program would trip over: each must fail."""
        bad = copy.deepcopy(document)
        bad["schema_version"] = "1"
        self.assert_invalid(bad, "schema_version as a string")
        bad["schema_version"] = True
        self.assert_invalid(bad, "schema_version as a boolean")
        bad["schema_version"] = 2
        self.assert_invalid(bad, "schema_version 2")
        for key in self.schema["required"]:
            bad = copy.deepcopy(document)
            del bad[key]
            self.assert_invalid(bad, f"a document without {key}")
        bad = copy.deepcopy(document)
        bad["a_field_no_schema_names"] = 0
        self.assert_invalid(bad, "an unnamed top-level field")
        # ...which the open schema, the one for programs, accepts (fields are only added).
        self.assertEqual(errors(self.open_validator, bad), [])


class Backends(SchemaCase):
    name = "backends"

    def check(self, platform):
        doc = run_cli("backends", "--platform", platform)
        self.assert_valid(doc, f"backends --platform {platform}")
        self.assertEqual(doc["platform"], platform)
        names = [b["name"] for b in doc["backends"]]
        self.assertIn("REFERENCE", names)
        self.assertIn("CPU_FLASH", names)
        for b in doc["backends"]:
            caps, text = b["capabilities"], b["capabilities_text"]
            self.assertEqual(set(text), set(caps) - {"compute_capability", "mla_only",
                                                     "separate_v_head_size",
                                                     "kv_layout_required"}, b["name"])
            self.assertEqual(b["runnable"], b["reasons"] == [], b["name"])
            # The typed rule and the sentence say the same thing.
            for field in ("head_sizes", "kernel_block_sizes"):
                rule = caps[field]
                if "values" in rule:
                    self.assertTrue(text[field].startswith(", ".join(map(str, rule["values"]))),
                                    f"{b['name']} {field}: {rule} vs {text[field]!r}")
                elif rule["multiple_of"] > 1:
                    self.assertIn(f"multiples of {rule['multiple_of']}", text[field])
                else:
                    self.assertTrue(text[field].startswith("any"), text[field])
            self.assertEqual(text["dtypes"], ", ".join(caps["dtypes"]))
            self.assertEqual(caps["compute_capability"] is None, caps["platform"] != "cuda")
            if caps["mla_only"]:
                self.assertTrue(caps["mla"])
        return doc

    def test_cpu(self):
        doc = self.check("cpu")
        cpu_flash = next(b for b in doc["backends"] if b["name"] == "CPU_FLASH")
        self.assertTrue(cpu_flash["runnable"])
        self.assertEqual(cpu_flash["capabilities"]["platform"], "cpu")

    def test_described_cuda(self):
        doc = self.check("cuda:9.0")
        self.assertFalse(doc["platform_is_local"])
        for b in doc["backends"]:
            if b["capabilities"]["platform"] == "cpu":
                self.assertFalse(b["runnable"], b["name"])

    def test_wrong_documents_fail(self):
        doc = run_cli("backends", "--platform", "cpu")
        self.assert_wrong_documents_fail(doc)
        caps = doc["backends"][0]["capabilities"]
        for field, prose in (("head_sizes", "64, 128, 256"), ("kernel_block_sizes", "any"),
                             ("dtypes", "float32, bfloat16"), ("sinks", "yes"),
                             ("preferred_block_size", "16"), ("platform", "cuda (8.0+)")):
            bad = copy.deepcopy(doc)
            bad["backends"][0]["capabilities"][field] = prose
            self.assert_invalid(bad, f"capabilities.{field} as prose {prose!r}")
        bad = copy.deepcopy(doc)
        bad["backends"][0]["capabilities"]["head_sizes"] = {"multiple_of": 16}
        self.assert_invalid(bad, "a rule without min and max")
        bad = copy.deepcopy(doc)
        bad["backends"][0]["capabilities"]["head_sizes"] = {"values": []}
        self.assert_invalid(bad, "an empty list of sizes")
        bad = copy.deepcopy(doc)
        bad["backends"][0]["capabilities"]["head_sizes_text"] = "any"
        self.assert_invalid(bad, "a capability the schema does not name")
        bad = copy.deepcopy(doc)
        bad["backends"][0]["capabilities"]["compute_capability"] = {"min": "8.0", "max": None}
        self.assert_invalid(bad, "a compute capability as a string")
        self.assertIsInstance(caps["head_sizes"], dict)


class Explain(SchemaCase):
    name = "explain"

    def test_every_model_on_cpu_and_described_cuda(self):
        self.assertGreaterEqual(len(MODELS), 5, "models/ holds the configs to explain")
        for model in MODELS:
            for platform in ("cpu", "cuda:9.0"):
                with self.subTest(model=model.name, platform=platform):
                    # A float32 checkpoint runs in bfloat16 there (auto dtype): no --dtype.
                    unserved = CUDA_UNSERVED.get(model.stem) if platform != "cpu" else None
                    if unserved:
                        # Refused with the reason, not silently: no CUDA backend serves it.
                        r = subprocess.run([CLI, "explain", "--model", str(model), "--platform",
                                            platform, "--json"], capture_output=True, text=True,
                                           timeout=300, stdin=subprocess.DEVNULL)
                        self.assertEqual(r.returncode, 1, r.stdout)
                        self.assertIn(unserved, r.stderr)
                        continue
                    doc = run_cli("explain", "--model", str(model), "--platform", platform)
                    self.assert_valid(doc, f"explain {model.name} on {platform}")
                    self.assertEqual(doc["platform"], platform)
                    attention = [l for l in doc["layers"] if l["is_attention"]]
                    self.assertTrue(attention, model.name)
                    for group in doc["kv_cache_groups"]:
                        spec = group["cache_spec"]
                        self.assertEqual(spec["kind"], group["kind"])
                        if group["kind"] == "mamba":
                            self.assertEqual(spec["state"]["bytes_per_request"] *
                                             len(group["layers"]),
                                             group["state_bytes_per_request"])
                            self.assertEqual(group["page_size_bytes"], doc["page_size_bytes"])
                            continue
                        self.assertEqual(spec["bytes_per_token"] * len(group["layers"]),
                                         group["kv_bytes_per_token"])
                        self.assertEqual(spec["block_size"] is None, not group["has_cache"])
                        if group["has_cache"]:
                            self.assertEqual(spec["block_size"], group["block_size"])
                            self.assertEqual(group["page_size_bytes"],
                                             spec["block_size"] * spec["bytes_per_token"])

    def test_user_choices(self):
        doc = run_cli("explain", "--model", "gemma-3-1b-it", "--block-size", "32",
                      "--attention-config", '{"backend_per_kind": {"sliding_window": "REFERENCE"}}')
        self.assert_valid(doc, "explain gemma-3-1b-it with a block size and a per-kind choice")
        self.assertEqual(doc["block_size"], 32)
        self.assertEqual(doc["attention_config"]["backend_per_kind"],
                         {"sliding_window": "REFERENCE"})
        chosen = {l["chosen_by"] for l in doc["layers"] if l["kind"] == "sliding_window"}
        self.assertEqual(chosen, {"per_kind"})

    def test_wrong_documents_fail(self):
        doc = run_cli("explain", "--model", "gemma-3-1b-it")
        self.assert_wrong_documents_fail(doc)
        bad = copy.deepcopy(doc)
        bad["layers"][0]["head_size"] = "256"
        self.assert_invalid(bad, "a head size as a string")
        bad = copy.deepcopy(doc)
        bad["layers"][0]["backend"] = None
        self.assert_invalid(bad, "an attention layer without a backend")
        bad = copy.deepcopy(doc)
        bad["kv_cache_groups"][0]["cache_spec"]["sliding_window"] = "512"
        self.assert_invalid(bad, "a window as a string")


class Run(SchemaCase):
    name = "run"
    SMALL = ["--requests", "2", "--prompt-len", "8:24", "--output-len", "3",
             "--max-layers-per-kind", "1", "--window-cap", "16", "--max-batch-tokens", "32",
             "--kv-cache-memory", "8MiB", "--quiet"]

    def test_models(self):
        for model, extra in (("gemma-3-1b-it", ["--verify"]), ("deepseek-v2-lite", []),
                             ("whisper-tiny", ["--encoder-len", "10:20"])):
            with self.subTest(model=model):
                doc = run_cli("run", "--model", model, *self.SMALL, *extra)
                self.assert_valid(doc, f"run {model}")
                self.assertEqual(doc["requests"], 2)
                for group in doc["kv_cache_groups"]:
                    self.assertEqual(group["backend_planned"],
                                     "+".join(group["backends_planned"]) or "-")
                if "--verify" in extra:
                    self.assertIsNotNone(doc["verify"])
                    self.assertTrue(doc["verify"]["passed"])
                else:
                    self.assertIsNone(doc["verify"])

    def test_wrong_documents_fail(self):
        doc = run_cli("run", "--model", "llama-3.1-8b-instruct", *self.SMALL)
        self.assert_wrong_documents_fail(doc)
        bad = copy.deepcopy(doc)
        bad["output_checksum"] = 12345
        self.assert_invalid(bad, "a checksum as a number")
        bad = copy.deepcopy(doc)
        bad["kv_cache_groups"][0]["backends_planned"] = "CPU_FLASH"
        self.assert_invalid(bad, "planned backends as a string")


class Conformance(SchemaCase):
    name = "conformance"

    def test_reference(self):
        doc = run_cli("conformance", "--backend", "REFERENCE", "--filter", "mixed/float16/kv=auto")
        self.assert_valid(doc, "conformance REFERENCE")
        self.assertTrue(doc["ok"])
        self.assertEqual(doc["passed"], len(doc["cases"]))
        self.assert_wrong_documents_fail(doc)
        bad = copy.deepcopy(doc)
        bad["cases"][0]["status"] = "passed"
        self.assert_invalid(bad, "an unknown case status")


class Bench(SchemaCase):
    name = "bench"

    def test_one_shape(self):
        doc = run_cli("bench", "--backend", "cpu_flash", "--heads", "4/2", "--head-size", "64",
                      "--batch", "2", "--context", "128", "--query-len", "2", "--causal",
                      "--threads", "1", "--repeats", "1", "--warmup", "0",
                      "--read-buffer-mb", "8")
        self.assert_valid(doc, "bench cpu_flash")
        self.assertEqual(doc["config"]["num_heads"], 4)
        self.assertEqual(doc["config"]["num_kv_heads"], 2)
        self.assertEqual(doc["config"]["context"], 128)
        self.assertTrue(doc["config"]["causal"])
        self.assert_wrong_documents_fail(doc)
        bad = copy.deepcopy(doc)
        bad["median_us"] = "12.5 us"
        self.assert_invalid(bad, "a time as prose")


class EverySchemaIsTested(unittest.TestCase):
    def test_each_schema_file_has_a_case(self):
        files = {p.name.removesuffix(".schema.json") for p in SCHEMAS.glob("*.schema.json")}
        cases = {c.name for c in SchemaCase.__subclasses__()}
        self.assertEqual(files, cases)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: json_schema_test.py ATTNKIT_CLI [unittest options]")
    CLI = sys.argv.pop(1)
    unittest.main(verbosity=2)
