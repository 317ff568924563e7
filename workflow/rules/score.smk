# Sandboxed scoring: samples Parquet (generate) -> per-sample rewards and verdicts (analysis).
# Its (model, dataset) pairs are those the analysis targets need (maxk.workflow.targets).


rule score:
    input:
        samples=P.samples("{seed}", "{model}", "{dataset}"),
        problems=P.data("{dataset}"),
    output:
        scores=P.scores("{seed}", "{model}", "{dataset}"),
        provenance=P.scores("{seed}", "{model}", "{dataset}") + ".provenance.json",
    log:
        f"{SEED_LOGS}/score/{{model}}/{{dataset}}.log",
    benchmark:
        f"{SEED_BENCH}/score/{{model}}/{{dataset}}.tsv"
    conda:
        "../../envs/score.yaml"
    threads: threads_of("score")
    resources:
        **resources_of("score"),
    params:
        sandbox=lambda wc: config_json("score"),
        cache=P.SCORE_CACHE,
    # {threads} (the cores granted) is right here: it is the number of sandbox worker processes, not a
    # numerical thread count, and a verdict does not depend on it; more workers than cores would only
    # stretch each program's wall time towards its wall limit. --cache: a (problem, program) pair another
    # model's job already ran under the same limits is not run again (maxk.sandbox.shared_cache).
    shell:
        "maxk score --samples {input.samples} --problems {input.problems} --output {output.scores}"
        " --config-json {params.sandbox:q} --threads {threads} --cache {params.cache} > {log} 2>&1"
