# Analysis: per-problem metrics -> tables, significance, figures; plus the estimator lab.
# Inputs are the scoring stage's results/scores/{model}/{dataset}.parquet (and, for figure 2, the
# generation stage's results/samples/{model}/{dataset}.parquet).
import os

from maxk.analysis import paths as AP

ANALYSIS = config["analysis"]
#: The analysis config without the lab and the claims (tables/figures/stats don't rerun when they change).
ANALYSIS_JSON = json.dumps(
    {k: v for k, v in ANALYSIS.items() if k not in ("lab", "claims")}, sort_keys=True
)
#: What the claims stage reads of the analysis config.
CLAIMS_JSON = json.dumps(
    {
        k: ANALYSIS.get(k)
        for k in ("claims", "models", "significance", "bootstrap", "decimals")
    },
    sort_keys=True,
)
ANALYSIS_METRICS_JSON = json.dumps(
    {k: ANALYSIS.get(k) for k in ("ks", "ragged")}, sort_keys=True
)


#: Every table, the significance file and every figure the config declares. Requesting them pulls
#: in, through their inputs, every (model, dataset) pair the tables and figures need: training,
#: generation and scoring of exactly those pairs.
ANALYSIS_TARGETS = AP.targets(ANALYSIS, RESULTS)
ALL_TARGETS.extend(ANALYSIS_TARGETS)


rule analysis_metrics:
    input:
        f"{RESULTS}/scores/{{model}}/{{dataset}}.parquet",
    output:
        f"{RESULTS}/metrics/{{model}}/{{dataset}}.parquet",
    log:
        f"{LOGS}/analysis/metrics/{{model}}/{{dataset}}.log",
    benchmark:
        f"{BENCH}/analysis/metrics/{{model}}/{{dataset}}.tsv"
    conda:
        "../../envs/report.yaml"
    threads: threads_of("analysis_metrics")
    resources:
        **resources_of("analysis_metrics"),
    params:
        cfg=ANALYSIS_METRICS_JSON,
    shell:
        "maxk analyze metrics --config-json {params.cfg:q} --scores {input} --output {output} > {log} 2>&1"


rule analysis_table:
    input:
        lambda wc: AP.metrics_paths(RESULTS, AP.table_pairs(ANALYSIS, wc.table)),
    output:
        tex=report(
            f"{RESULTS}/tables/{{table}}.tex",
            caption="../report/analysis_table.rst",
            category="Tables",
            subcategory="LaTeX",
        ),
        md=report(
            f"{RESULTS}/tables/{{table}}.md",
            caption="../report/analysis_table.rst",
            category="Tables",
            subcategory="Markdown",
        ),
        csv=report(
            f"{RESULTS}/tables/{{table}}.csv",
            caption="../report/analysis_table.rst",
            category="Tables",
            subcategory="CSV with bootstrap CIs",
        ),
    log:
        f"{LOGS}/analysis/tables/{{table}}.log",
    benchmark:
        f"{BENCH}/analysis/tables/{{table}}.tsv"
    conda:
        "../../envs/report.yaml"
    threads: threads_of("analysis_table")
    resources:
        **resources_of("analysis_table"),
    params:
        cfg=ANALYSIS_JSON,
        seed=config["seed"],
        metrics_dir=lambda w, input: AP.up2(input, f"{RESULTS}/metrics"),
        outdir=lambda w, output: os.path.dirname(output.tex),
    shell:
        "maxk analyze tables --config-json {params.cfg:q} --seed {params.seed} "
        "--metrics-dir {params.metrics_dir} --outdir {params.outdir} --table {wildcards.table} > {log} 2>&1"


rule analysis_stats:
    input:
        AP.metrics_paths(RESULTS, AP.significance_pairs(ANALYSIS)),
    output:
        csv=report(
            f"{RESULTS}/stats/significance.csv",
            caption="../report/analysis_stats.rst",
            category="Significance",
        ),
        json=f"{RESULTS}/stats/significance.json",
    log:
        f"{LOGS}/analysis/stats.log",
    benchmark:
        f"{BENCH}/analysis/stats.tsv"
    conda:
        "../../envs/report.yaml"
    threads: threads_of("analysis_stats")
    resources:
        **resources_of("analysis_stats"),
    params:
        cfg=ANALYSIS_JSON,
        seed=config["seed"],
        metrics_dir=lambda w, input: AP.up2(input, f"{RESULTS}/metrics"),
    shell:
        "maxk analyze stats --config-json {params.cfg:q} --seed {params.seed} "
        "--metrics-dir {params.metrics_dir} --output {output.csv} > {log} 2>&1"


rule analysis_figure_passk:
    input:
        AP.metrics_paths(
            RESULTS,
            [
                (m, ANALYSIS["figures"]["passk"]["dataset"])
                for m in ANALYSIS["figures"]["passk"]["models"]
            ],
        )
        if "passk" in ANALYSIS.get("figures", {})
        else [],
    output:
        pdf=f"{RESULTS}/figures/passk_curve.pdf",
        png=report(
            f"{RESULTS}/figures/passk_curve.png",
            caption="../report/analysis_passk.rst",
            category="Figures",
        ),
    log:
        f"{LOGS}/analysis/figures/passk_curve.log",
    benchmark:
        f"{BENCH}/analysis/figures/passk_curve.tsv"
    conda:
        "../../envs/report.yaml"
    threads: threads_of("analysis_figure")
    resources:
        **resources_of("analysis_figure"),
    params:
        cfg=ANALYSIS_JSON,
        seed=config["seed"],
        metrics_dir=lambda w, input: AP.up2(input, f"{RESULTS}/metrics"),
        stem=lambda w, output: os.path.splitext(output.pdf)[0],
    shell:
        "maxk analyze figure passk --config-json {params.cfg:q} --seed {params.seed} "
        "--metrics-dir {params.metrics_dir} --output-stem {params.stem} > {log} 2>&1"


rule analysis_figure_entropy:
    input:
        [
            f"{RESULTS}/samples/{m}/{ANALYSIS['figures']['entropy']['dataset']}.parquet"
            for m in ANALYSIS["figures"]["entropy"]["models"]
        ]
        if "entropy" in ANALYSIS.get("figures", {})
        else [],
    output:
        pdf=f"{RESULTS}/figures/entropy.pdf",
        png=report(
            f"{RESULTS}/figures/entropy.png",
            caption="../report/analysis_entropy.rst",
            category="Figures",
        ),
    log:
        f"{LOGS}/analysis/figures/entropy.log",
    benchmark:
        f"{BENCH}/analysis/figures/entropy.tsv"
    conda:
        "../../envs/report.yaml"
    threads: threads_of("analysis_figure")
    resources:
        **resources_of("analysis_figure"),
    params:
        cfg=ANALYSIS_JSON,
        seed=config["seed"],
        samples_dir=lambda w, input: AP.up2(input, f"{RESULTS}/samples"),
        stem=lambda w, output: os.path.splitext(output.pdf)[0],
    shell:
        "maxk analyze figure entropy --config-json {params.cfg:q} --seed {params.seed} "
        "--samples-dir {params.samples_dir} --output-stem {params.stem} > {log} 2>&1"


rule analysis_figure_maxk:
    input:
        lambda wc: AP.metrics_paths(
            RESULTS,
            [(m, wc.dataset) for m in ANALYSIS["figures"]["maxk_curves"]["models"]],
        ),
    output:
        pdf=f"{RESULTS}/figures/maxk_{{dataset}}.pdf",
        png=report(
            f"{RESULTS}/figures/maxk_{{dataset}}.png",
            caption="../report/analysis_maxk.rst",
            category="Figures",
        ),
    log:
        f"{LOGS}/analysis/figures/maxk_{{dataset}}.log",
    benchmark:
        f"{BENCH}/analysis/figures/maxk_{{dataset}}.tsv"
    conda:
        "../../envs/report.yaml"
    threads: threads_of("analysis_figure")
    resources:
        **resources_of("analysis_figure"),
    params:
        cfg=ANALYSIS_JSON,
        seed=config["seed"],
        metrics_dir=lambda w, input: AP.up2(input, f"{RESULTS}/metrics"),
        stem=lambda w, output: os.path.splitext(output.pdf)[0],
    shell:
        "maxk analyze figure maxk --config-json {params.cfg:q} --seed {params.seed} "
        "--metrics-dir {params.metrics_dir} --dataset {wildcards.dataset} "
        "--output-stem {params.stem} > {log} 2>&1"


rule analysis_claims:
    input:
        **AP.claims_inputs(ANALYSIS, RESULTS),
    output:
        csv=report(
            f"{RESULTS}/claims/claims.csv",
            caption="../report/analysis_claims.rst",
            category="Claims",
        ),
        md=report(
            f"{RESULTS}/claims/claims.md",
            caption="../report/analysis_claims.rst",
            category="Claims",
        ),
    log:
        f"{LOGS}/analysis/claims.log",
    benchmark:
        f"{BENCH}/analysis/claims.tsv"
    conda:
        "../../envs/report.yaml"
    threads: threads_of("analysis_claims")
    resources:
        **resources_of("analysis_claims"),
    params:
        cfg=CLAIMS_JSON,
        seed=config["seed"],
        metrics_dir=lambda w, input: AP.up2(input.metrics, f"{RESULTS}/metrics"),
        samples_dir=lambda w, input: AP.up2(input.samples, f"{RESULTS}/samples"),
        outdir=lambda w, output: os.path.dirname(output.csv),
    shell:
        "maxk analyze claims --config-json {params.cfg:q} --seed {params.seed} "
        "--metrics-dir {params.metrics_dir} --samples-dir {params.samples_dir} "
        "--outdir {params.outdir} > {log} 2>&1"


rule analysis_lab:
    output:
        onpolicy=report(
            f"{RESULTS}/lab/onpolicy.csv",
            caption="../report/analysis_lab.rst",
            category="Estimator lab",
        ),
        offpolicy=f"{RESULTS}/lab/offpolicy.csv",
        onpolicy_pdf=f"{RESULTS}/lab/onpolicy.pdf",
        onpolicy_png=report(
            f"{RESULTS}/lab/onpolicy.png",
            caption="../report/analysis_lab.rst",
            category="Estimator lab",
        ),
        offpolicy_pdf=f"{RESULTS}/lab/offpolicy.pdf",
        offpolicy_png=report(
            f"{RESULTS}/lab/offpolicy.png",
            caption="../report/analysis_lab_offpolicy.rst",
            category="Estimator lab",
        ),
        surrogate_pdf=f"{RESULTS}/lab/offpolicy_surrogate.pdf",
        surrogate_png=report(
            f"{RESULTS}/lab/offpolicy_surrogate.png",
            caption="../report/analysis_lab_surrogate.rst",
            category="Estimator lab",
        ),
    log:
        f"{LOGS}/analysis/lab.log",
    benchmark:
        f"{BENCH}/analysis/lab.tsv"
    conda:
        "../../envs/report.yaml"
    threads: threads_of("analysis_lab")
    resources:
        **resources_of("analysis_lab"),
    params:
        cfg=json.dumps({"lab": config["analysis"]["lab"]}, sort_keys=True),
        seed=config["seed"],
        outdir=lambda w, output: os.path.dirname(output.onpolicy),
    shell:
        "maxk analyze lab --config-json {params.cfg:q} --seed {params.seed} "
        "--outdir {params.outdir} > {log} 2>&1"


ALL_TARGETS.extend(
    [
        f"{RESULTS}/lab/onpolicy.csv",
        f"{RESULTS}/lab/offpolicy.csv",
        f"{RESULTS}/lab/onpolicy.png",
        f"{RESULTS}/lab/offpolicy.png",
        f"{RESULTS}/lab/offpolicy_surrogate.png",
    ]
)
