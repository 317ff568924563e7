# Sandboxed scoring: samples Parquet (generate) -> per-sample rewards and verdicts (analysis).
# Targets are requested by the orchestration stage (model x dataset); nothing is added to ALL_TARGETS here.


rule score:
    input:
        samples=f"{RESULTS}/samples/{{model}}/{{dataset}}.parquet",
        problems=f"{RESULTS}/data/{{dataset}}.jsonl.gz",
    output:
        scores=f"{RESULTS}/scores/{{model}}/{{dataset}}.parquet",
        provenance=f"{RESULTS}/scores/{{model}}/{{dataset}}.parquet.provenance.json",
    log:
        f"{LOGS}/score/{{model}}/{{dataset}}.log",
    benchmark:
        f"{BENCH}/score/{{model}}/{{dataset}}.tsv"
    conda:
        "../../envs/score.yaml"
    threads: threads_of("score")
    resources:
        **resources_of("score"),
    params:
        sandbox=config_json("sandbox"),
    shell:
        "maxk score --samples {input.samples} --problems {input.problems} --output {output.scores}"
        " --config-json {params.sandbox:q} --threads {threads} > {log} 2>&1"
