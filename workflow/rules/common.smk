# Shared helpers (paths, config access, per-rule resources) used by all the rule files.
import json

from maxk.provenance import config_hash

#: Final outputs of every stage; each rule file extends it and `rule all` requests it.
ALL_TARGETS = []

RESULTS = "results"
LOGS = f"{RESULTS}/logs"
BENCH = f"{RESULTS}/benchmarks"
CONFIG_HASH = config_hash(config)


def rule_resources(name):
    """threads/mem_mb/runtime/gpu for rule `name` from config['resources'] (default entry merged)."""
    table = config.get("resources", {})
    merged = dict(table.get("default", {}))
    merged.update(table.get(name, {}))
    return merged


def config_json(*keys):
    """The config subset under `keys` as canonical JSON, for `params:` (a change reruns the job)."""
    node = config
    for key in keys:
        node = node[key]
    return json.dumps(node, sort_keys=True)
