# Shared helpers used by all the rule files. Paths, final targets and the config slice each job
# depends on live in the package (maxk.paths; maxk.workflow: targets, slices), tested without Snakemake.
from maxk import paths as P
from maxk.workflow import slices
from maxk.workflow.resources import retry_resources
from maxk.workflow.targets import final_targets

RESULTS, LOGS, BENCH = P.RESULTS, P.LOGS, P.BENCH
#: logs and timings of the jobs of one seed's run (the `seed` wildcard: one of config["replicates"])
SEED_LOGS, SEED_BENCH = P.logs("{seed}"), P.benchmarks("{seed}")


wildcard_constraints:
    seed=r"\d+",


def get_final_output():
    """Every final output the config declares (maxk.workflow.targets.final_targets)."""
    return final_targets(config)


def config_json(rule, name=None, seed=None):
    """Rule `rule`'s config slice (maxk.workflow.slices) as canonical JSON, for `params:` (a change
    of that slice, and only of it, reruns the job); `seed`: the job's seed wildcard, if it has one.
    """
    return slices.config_json(config, rule, name, seed)


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


def rescore_setting(key):
    """`params:` value `key` of analysis.figures.entropy.rescore, read only when a job exists (the
    re-scoring rule is requested only when figure 2 and its rescore are configured)."""
    return lambda wc: config["analysis"]["figures"]["entropy"]["rescore"][key]
