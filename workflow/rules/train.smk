# Training stage: the base model (embedded: built by `maxk base`) and one GRPO job per named run.
# Paper scale: the train command is `accelerate launch` (DeepSpeed ZeRO config in workflow/deepspeed/)
# with as many processes as the rule's `gpu` resource; built by maxk.train.launch.launch_prefix.
import json

from maxk.generate.rules import model_revision_arg
from maxk.train.launch import launch_prefix, train_config_json

BASE = config["base_model"]
BASE_MODEL = f"{RESULTS}/models/base" if BASE["build"] else BASE["path"]
TRAIN_DATA = f"{RESULTS}/data/{config['train']['dataset']}.jsonl.gz"


if BASE["build"]:

    rule base_model:
        input:
            train=TRAIN_DATA,
            test=f"{RESULTS}/data/{BASE['eval']['dataset']}.jsonl.gz",
        output:
            model=directory(f"{RESULTS}/models/base"),
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
            config=lambda wc: json.dumps(
                {
                    k: config.get(k)
                    for k in ("seed", "base_model", "prompt", "sandbox")
                },
                sort_keys=True,
            ),
        shell:
            "maxk base --config-json {params.config:q} --train-data {input.train} "
            "--test-data {input.test} --out {output.model} > {log} 2>&1"


rule train:
    input:
        data=TRAIN_DATA,
        model=BASE_MODEL if BASE["build"] else [],
    output:
        model=directory(f"{RESULTS}/models/{{run}}"),
        metrics=f"{RESULTS}/metrics/train/{{run}}.csv",
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
        config=lambda wc: train_config_json(config, wc.run),
        model=lambda wc, input: input.model if BASE["build"] else BASE["path"],
        revision=model_revision_arg(config, "base"),
        checkpoints=config["train"]["checkpoints"],
        launch=launch_prefix(
            config["train"]["launch"],
            rule_resources("train").get("gpu", 0),
            basedir=workflow.basedir,
        ),
    shell:
        "{params.launch} train --run {wildcards.run} --config-json {params.config:q} "
        "--model {params.model}{params.revision} --data {input.data} --out {output.model} "
        "--metrics {output.metrics} --checkpoints {params.checkpoints} > {log} 2>&1"


ALL_TARGETS.extend(
    f"{RESULTS}/metrics/train/{run}.csv" for run in sorted(config["runs"])
)
ALL_TARGETS.extend(f"{RESULTS}/models/{run}" for run in sorted(config["runs"]))
