# Generation stage: n samples per problem for one (model, dataset) of one seed, in shards merged in order.
#   results/seed{seed}/samples/{model}/{dataset}/shard{i}.parquet  (+ .manifest.json; temp unless keep_shards)
#   results/seed{seed}/samples/{model}/{dataset}.parquet           (+ .manifest.json)
# With generate.num_shards = 1 (the embedded default) the one shard job writes the final file itself
# and there is no merge job: a job saved per (model, dataset), i.e. one interpreter start-up each.
# {model} is `base` (config base_model: results/seed{seed}/models/base when built, else base_model.path,
# e.g. a hub id at paper scale), `base_T{t}` (the base sampled at temperature t: the yardstick,
# analysis.claims.yardstick_temperatures) or a training run name (results/seed{seed}/models/{run}). Orchestration requests the (model, dataset) pairs.
# Paths: maxk.paths; resources: maxk.workflow.resources.generate_resources.
from maxk.workflow.resources import generate_resources

GEN_RES = generate_resources(config, rule_resources("generate_shard"))
GEN_SINGLE = config["generate"]["num_shards"] == 1
GEN_NAME = "{model}/{dataset}" if GEN_SINGLE else "{model}/{dataset}/shard{shard}"
GEN_SHARD = (
    P.samples("{seed}", "{model}", "{dataset}", "")
    if GEN_SINGLE
    else P.shard("{seed}", "{model}", "{dataset}", "{shard}", "")
)

# shard files are temp() unless each is the final file (one shard) or kept (keep_shards)
GEN_KEEP = GEN_SINGLE or config["generate"]["keep_shards"]


rule generate_shard:
    input:
        problems=P.data("{dataset}"),
        model=lambda wc: P.model_inputs(config, wc.seed, wc.model),
    output:
        samples=f"{GEN_SHARD}.parquet" if GEN_KEEP else temp(f"{GEN_SHARD}.parquet"),
        manifest=(
            f"{GEN_SHARD}.manifest.json"
            if GEN_KEEP
            else temp(f"{GEN_SHARD}.manifest.json")
        ),
    log:
        f"{SEED_LOGS}/generate/{GEN_NAME}.log",
    benchmark:
        f"{SEED_BENCH}/generate/{GEN_NAME}.tsv"
    wildcard_constraints:
        model=r"[A-Za-z0-9_.\-]+",
        dataset=r"[A-Za-z0-9_.\-]+",
        shard=r"\d+",
    conda:
        "../../envs/generate.yaml"
    threads: GEN_RES["threads"]
    resources:
        **resources_of("generate_shard", GEN_RES),
    params:
        config=lambda wc: config_json("generate_shard", wc.model, seed=wc.seed),
        model_path=lambda wc: P.model_path(config, wc.seed, wc.model),
        revision=lambda wc: P.model_revision_arg(config, wc.model),
        num_shards=config["generate"]["num_shards"],
        shard=lambda wc: wc.get("shard", "0"),
        gpus=GEN_RES.get("gpu", 0),
        threads=torch_threads("generate_shard"),  # the configured count, not {threads}: common.smk
    shell:
        "maxk generate --model-path {params.model_path:q}{params.revision} --model-name {wildcards.model} "
        "--problems {input.problems} --dataset {wildcards.dataset} --shard {params.shard} "
        "--num-shards {params.num_shards} --threads {params.threads} --gpus {params.gpus} "
        "--config-json {params.config:q} --output {output.samples} > {log} 2>&1"


if not GEN_SINGLE:

    rule merge_samples:
        input:
            shards=lambda wc: P.shard_paths(config, wc.seed, wc.model, wc.dataset),
            manifests=lambda wc: P.shard_paths(
                config, wc.seed, wc.model, wc.dataset, ".manifest.json"
            ),
        output:
            samples=P.samples("{seed}", "{model}", "{dataset}"),
            manifest=P.samples("{seed}", "{model}", "{dataset}", ".manifest.json"),
        log:
            f"{SEED_LOGS}/generate/{{model}}/{{dataset}}.merge.log",
        benchmark:
            f"{SEED_BENCH}/generate/{{model}}/{{dataset}}.merge.tsv"
        wildcard_constraints:
            model=r"[A-Za-z0-9_.\-]+",
            dataset=r"[A-Za-z0-9_.\-]+",
        conda:
            "../../envs/generate.yaml"
        threads: threads_of("merge_samples")
        resources:
            **resources_of("merge_samples"),
        shell:
            "maxk generate merge --output {output.samples} {input.shards} > {log} 2>&1"


# Figure 2's models, re-scored on a fixed subsample with transformers (analysis.figures.entropy.rescore):
# the exact full-vocabulary entropy beside vLLM's top-k bound (maxk.generate.rescore). A GPU job at
# paper scale, like generation.


rule entropy_rescore:
    input:
        samples=P.samples("{seed}", "{model}", "{dataset}"),
        problems=P.data("{dataset}"),
        model=lambda wc: P.model_inputs(config, wc.seed, wc.model),
    output:
        rescored=P.entropy_rescored("{seed}", "{model}", "{dataset}"),
        manifest=P.entropy_rescored("{seed}", "{model}", "{dataset}", ".manifest.json"),
    log:
        f"{SEED_LOGS}/generate/rescore/{{model}}/{{dataset}}.log",
    benchmark:
        f"{SEED_BENCH}/generate/rescore/{{model}}/{{dataset}}.tsv"
    wildcard_constraints:
        model=r"[A-Za-z0-9_.\-]+",
        dataset=r"[A-Za-z0-9_.\-]+",
    conda:
        "../../envs/generate.yaml"
    threads: GEN_RES["threads"]
    resources:
        **resources_of("generate_shard", GEN_RES),
    params:
        config=lambda wc: config_json("entropy_rescore", seed=wc.seed),
        model_path=lambda wc: P.model_path(config, wc.seed, wc.model),
        revision=lambda wc: P.model_revision_arg(config, wc.model),
        problems=rescore_setting("problems"),
        samples=rescore_setting("samples"),
        batch_size=rescore_setting("batch_size"),
        gpus=GEN_RES.get("gpu", 0),
        threads=torch_threads("generate_shard"),
    shell:
        "maxk generate rescore --model-path {params.model_path:q}{params.revision} "
        "--model-name {wildcards.model} --samples {input.samples} --problems {input.problems} "
        "--subsample-problems {params.problems} --subsample-samples {params.samples} "
        "--batch-size {params.batch_size} --threads {params.threads} --gpus {params.gpus} "
        "--config-json {params.config:q} --output {output.rescored} > {log} 2>&1"
