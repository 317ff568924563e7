# Shared helpers used by all the rule files. Paths, final targets and the config slice each job
# depends on live in the package (maxk.paths; maxk.workflow: targets, slices), tested without Snakemake.
from maxk import paths as P
from maxk.workflow import slices
from maxk.workflow.resources import (
    prefix_of,
    prompts_priority,
    retry_resources,
    train_priority,
)
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


def prefix_metrics(seed, run):
    """The metrics CSV of the run whose end run `run` starts from (maxk.workflow.resources.prefix_of),
    so that its job waits for it; [] where none. Ancient: waited for, never read, so a newer one (the
    shorter run trained again) does not make the longer run's outputs stale."""
    prefix = prefix_of(config, run)
    return ancient(P.train_metrics(seed, prefix)) if prefix else []


def rule_resources(name):
    """threads/mem_mb/runtime/gpu for rule `name` from config['resources'] (default entry merged)."""
    table = config.get("resources", {})
    merged = dict(table.get("default", {}))
    merged.update(table.get(name, {}))
    return merged


def threads_of(name):
    """Rule `name`'s configured threads, config['resources'] (default 1): its `threads:`, and the torch
    threads its command computes with (`torch_threads`)."""
    return rule_resources(name).get("threads", 1)


def torch_threads(name, processes=1):
    """The torch threads of rule `name`'s command (each of its `processes` gets an equal share), for
    its `params:`: the CONFIGURED `resources.<name>.threads`, never `{threads}`. `{threads}` is what
    Snakemake grants the job (`--cores` caps it), and the thread count is part of the result (a
    matmul's reduction is split by thread; maxk.train.base.torch_numerics): with it, `--cores 1`
    built another base model from the same data, config and seed. With this, fewer cores only make
    the job slower."""
    return max(1, threads_of(name) // max(1, processes))


#: what Snakemake sets to a job's granted threads in its shell (snakemake/shell.py); torch's default
#: thread count follows OMP_NUM_THREADS
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def torch_threads_env(name, processes=1):
    """`VAR=N ...` before a command that takes no thread count of its own: the variables Snakemake
    sets from the granted threads, set to `torch_threads(name, processes)` instead."""
    n = torch_threads(name, processes)
    return " ".join(f"{var}={n}" for var in THREAD_VARS)


def resources_of(name, table=None):
    """`resources: **resources_of(name)`: mem_mb and runtime grow with each retry up to the rule's
    caps (maxk.workflow.resources), gpu if any. `table` replaces config['resources'] lookups for
    rules that compute their own (generation)."""
    return retry_resources(rule_resources(name) if table is None else table)


def rescore_setting(key):
    """`params:` value `key` of analysis.figures.entropy.rescore, read only when a job exists (the
    re-scoring rule is requested only when figure 2 and its rescore are configured)."""
    return lambda wc: config["analysis"]["figures"]["entropy"]["rescore"][key]
