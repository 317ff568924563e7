# Shared helpers (paths, config access, per-rule resources) used by all the rule files.
import json

from maxk.provenance import config_hash
from maxk.workflow.resources import retry_resources

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


def threads_of(name):
    """`threads:` of rule `name` from config['resources'] (default 1)."""
    return rule_resources(name).get("threads", 1)


def resources_of(name, table=None):
    """`resources: **resources_of(name)`: mem_mb and runtime grow with each retry up to the rule's
    caps (maxk.workflow.resources), gpu if any. `table` replaces config['resources'] lookups for
    rules that compute their own (generation)."""
    return retry_resources(rule_resources(name) if table is None else table)


def config_json(*keys):
    """The config subset under `keys` as canonical JSON, for `params:` (a change reruns the job)."""
    node = config
    for key in keys:
        node = node[key]
    return json.dumps(node, sort_keys=True)
