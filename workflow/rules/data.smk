# Data stage: every dataset of config['datasets'] -> results/data/{dataset}.jsonl.gz + manifest + provenance.
# params.config holds only what a dataset depends on (its entry, its pool, tokenizer, prompt).


rule data_build:
    output:
        data=P.data("{dataset}"),
        manifest=P.data("{dataset}", ".manifest.json"),
        provenance=P.data("{dataset}", ".jsonl.gz.provenance.json"),
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
        config=lambda wc: config_json("data_build", wc.dataset),
    shell:
        "maxk data build --name {wildcards.dataset} --config-json {params.config:q} "
        "--output {output.data} > {log} 2>&1"
