# Training stage: the base model (embedded: built by `maxk base`) and one GRPO job per named run.
# Paper scale: the train command is `accelerate launch` (DeepSpeed ZeRO config in workflow/deepspeed/)
# with as many processes as the rule's `gpu` resource; built by maxk.train.launch.launch_prefix.
from maxk.train.launch import launch_prefix

BASE = config["base_model"]
TRAIN_DATA = P.data(config["train"]["dataset"])


if BASE["build"]:

    rule base_model:
        input:
            train=TRAIN_DATA,
            test=P.data(BASE["eval"]["dataset"]),
        output:
            model=directory(P.model_dir(P.BASE)),
        log:
            f"{LOGS}/train/base_model.log",
        benchmark:
            f"{BENCH}/train/base_model.tsv"
        conda:
            "../../envs/train.yaml"
        threads: threads_of("base_model")
        resources:
            **resources_of("base_model"),
        params:
            config=lambda wc: config_json("base_model"),
        shell:
            "maxk base --config-json {params.config:q} --train-data {input.train} "
            "--test-data {input.test} --out {output.model} > {log} 2>&1"


rule train:
    input:
        data=TRAIN_DATA,
        model=P.model_inputs(config, P.BASE),
    output:
        model=directory(P.model_dir("{run}")),
        metrics=P.train_metrics("{run}"),
    log:
        f"{LOGS}/train/{{run}}.log",
    benchmark:
        f"{BENCH}/train/{{run}}.tsv"
    wildcard_constraints:
        run="|".join(sorted(config["runs"])),
    conda:
        "../../envs/train.yaml"
    threads: threads_of("train")
    resources:
        **resources_of("train"),
    params:
        config=lambda wc: config_json("train", wc.run),
        model=lambda wc, input: input.model if BASE["build"] else BASE["path"],
        revision=P.model_revision_arg(config, P.BASE),
        checkpoints=config["train"]["checkpoints"],
        launch=launch_prefix(
            config["train"]["launch"],
            rule_resources("train").get("gpu", 0),
            basedir=workflow.basedir,
            threads=threads_of("train"),
        ),
    shell:
        "{params.launch} train --run {wildcards.run} --config-json {params.config:q} "
        "--model {params.model}{params.revision} --data {input.data} --out {output.model} "
        "--metrics {output.metrics} --checkpoints {params.checkpoints} > {log} 2>&1"
