# Training stage: the base model (embedded: built by `maxk base`) and one GRPO job per named run, for
# each seed of config["replicates"] (the `seed` wildcard: results/seed{seed}/models/...).
# Paper scale: the train command is `accelerate launch` (DeepSpeed ZeRO config in workflow/deepspeed/)
# with as many processes as the rule's `gpu` resource; built by maxk.train.launch.launch_prefix.
from maxk.train.launch import launch_prefix

BASE = config["base_model"]
TRAIN = config["train"]
#: each run's RL prompts (rule train's input, P.train_prompts): train.dataset, edge-filtered by rule
#: rl_prompts by train.prompt_filter (one file per seed, shared) or by the run's own prompt_filter
RUN_FILTERS = P.run_prompt_filters(config)
#: the held-out curve's own pool, when train.heldout names one
HELDOUT_DATA = (
    [P.data(TRAIN["heldout"]["dataset"])]
    if (TRAIN["heldout"] or {}).get("dataset")
    else []
)


if BASE["build"]:

    CALL_DATA = [
        P.data(d) for d in [(BASE["calibration"] or {}).get("call_dataset")] if d
    ]

    rule base_model:
        input:
            train=P.data(BASE["sft"]["dataset"]),
            test=P.data(BASE["eval"]["dataset"]),
            call=CALL_DATA,
        output:
            model=directory(P.model_dir("{seed}", P.BASE)),
            curve=P.base_curve("{seed}"),
        log:
            f"{SEED_LOGS}/train/base_model.log",
        benchmark:
            f"{SEED_BENCH}/train/base_model.tsv"
        conda:
            "../../envs/train.yaml"
        threads: threads_of("base_model")
        resources:
            **resources_of("base_model"),
        params:
            config=lambda wc: config_json("base_model", seed=wc.seed),
            call=lambda wc, input: f" --call-data {input.call}" if input.call else "",
            threads=torch_threads("base_model"),  # the configured count, not {threads}: common.smk
        shell:
            "maxk base --config-json {params.config:q} --train-data {input.train} "
            "--test-data {input.test}{params.call} --out {output.model} --metrics {output.curve} "
            "--threads {params.threads} > {log} 2>&1"


#: the rule's {filter} wildcard: empty for the shared file (train.prompt_filter), -KEY for a run's own
EDGE_FILTERS = ([""] if TRAIN["prompt_filter"] else []) + [
    f"-{key}" for key in sorted(RUN_FILTERS)
]

if EDGE_FILTERS:

    rule rl_prompts:
        input:
            data=P.data(TRAIN["dataset"]),
            model=P.model_inputs(config, "{seed}", P.BASE),
        output:
            data=P.edge_prompts_pattern("{seed}", TRAIN["dataset"]),
            manifest=P.edge_prompts_pattern(
                "{seed}", TRAIN["dataset"], ".manifest.json"
            ),
        log:  # named by the dataset too: a probe that trains on another pool shares the tree
            f"{SEED_LOGS}/train/rl_prompts-{TRAIN['dataset']}{{filter}}.log",
        benchmark:
            f"{SEED_BENCH}/train/rl_prompts-{TRAIN['dataset']}{{filter}}.tsv"
        wildcard_constraints:
            filter="(?:" + "|".join(EDGE_FILTERS) + ")",  # an empty alternative: the shared file
        priority: lambda wc: prompts_priority(config, wc.filter, threads_of("rl_prompts"))
        conda:
            "../../envs/train.yaml"
        threads: threads_of("rl_prompts")
        resources:
            **resources_of("rl_prompts"),
        params:
            config=lambda wc: config_json("rl_prompts", wc.filter[1:], seed=wc.seed),
            model=lambda wc, input: input.model if BASE["build"] else BASE["path"],
            revision=P.model_revision_arg(config, P.BASE),
            threads_env=torch_threads_env("rl_prompts"),
        shell:
            "{params.threads_env} maxk rl-prompts --config-json {params.config:q} "
            "--model {params.model}{params.revision} --data {input.data} --output {output.data} > {log} 2>&1"


rule train:
    input:
        data=lambda wc: P.train_prompts(config, wc.seed, wc.run),
        heldout=HELDOUT_DATA,
        model=P.model_inputs(config, "{seed}", P.BASE),
        # the run whose end this run starts from (maxk.train.prefix): waited for, never read
        prefix=lambda wc: prefix_metrics(wc.seed, wc.run),
    output:
        model=directory(P.model_dir("{seed}", "{run}")),
        metrics=P.train_metrics("{seed}", "{run}"),
    log:
        f"{SEED_LOGS}/train/{{run}}.log",
    benchmark:
        f"{SEED_BENCH}/train/{{run}}.tsv"
    wildcard_constraints:
        run="|".join(sorted(config["runs"])),
    priority: lambda wc: train_priority(config, wc.run)
    conda:
        "../../envs/train.yaml"
    threads: threads_of("train")
    resources:
        **resources_of("train"),
    params:
        config=lambda wc: config_json("train", wc.run, wc.seed),
        model=lambda wc, input: input.model if BASE["build"] else BASE["path"],
        revision=P.model_revision_arg(config, P.BASE),
        heldout=lambda wc, input: (
            f" --heldout-data {input.heldout}" if input.heldout else ""
        ),
        checkpoints=config["train"]["checkpoints"],
        gpus=rule_resources("train").get("gpu", 0),
        trackers=f"{SEED_LOGS}/trackers",
        launch=launch_prefix(
            config["train"]["launch"],
            rule_resources("train").get("gpu", 0),
            basedir=workflow.basedir,
            threads=threads_of("train"),
        ),
        # each process's share of the configured threads (accelerate sets OMP_NUM_THREADS to the same)
        threads_env=torch_threads_env("train", rule_resources("train").get("gpu", 0)),
    shell:
        "{params.threads_env} {params.launch} train --run {wildcards.run} --config-json {params.config:q} "
        "--model {params.model}{params.revision} --data {input.data}{params.heldout} --out {output.model} "
        "--metrics {output.metrics} --checkpoints {params.checkpoints} --gpus {params.gpus} "
        "--trackers {params.trackers} > {log} 2>&1"
