# Data stage: every dataset of config['datasets'] -> results/data/{dataset}.jsonl.gz + manifest + provenance.
# params.config holds only what a dataset depends on (its entry, its pool, tokenizer, prompt).
from maxk.data.build import dataset_config_json


rule data_build:
    output:
        data=f"{RESULTS}/data/{{dataset}}.jsonl.gz",
        manifest=f"{RESULTS}/data/{{dataset}}.manifest.json",
        provenance=f"{RESULTS}/data/{{dataset}}.jsonl.gz.provenance.json",
    log:
        f"{LOGS}/data/{{dataset}}.log",
    benchmark:
        f"{BENCH}/data/{{dataset}}.tsv"
    wildcard_constraints:
        dataset="|".join(sorted(config["datasets"])),
    conda:
        "../../envs/report.yaml"
    threads: threads_of("data_build")
    resources:
        **resources_of("data_build"),
    params:
        config=lambda wc: dataset_config_json(config, wc.dataset),
    shell:
        "maxk data build --name {wildcards.dataset} --config-json {params.config:q} "
        "--output {output.data} > {log} 2>&1"


ALL_TARGETS.extend(
    f"{RESULTS}/data/{name}{ext}"
    for name in sorted(config["datasets"])
    for ext in (".jsonl.gz", ".manifest.json")
)
