# The environment every result of this run was produced in: config hash, git commit, packages.


rule environment:
    output:
        P.environment(),
    log:
        f"{LOGS}/environment.log",
    benchmark:
        f"{BENCH}/environment.tsv"
    conda:
        "../../envs/report.yaml"
    threads: threads_of("environment")
    resources:
        **resources_of("environment"),
    params:
        config=lambda wc: config_json("environment"),
    shell:
        "maxk provenance --config-json {params.config:q} --output {output} > {log} 2>&1"
