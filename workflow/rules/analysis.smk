# Analysis: per-problem metrics -> tables, significance, figures and claims of each seed; the claims
# across the seeds; the estimator lab (once). Inputs are the scoring stage's
# results/seed{seed}/scores/{model}/{dataset}.parquet (and, for figure 2, the generation stage's
# results/seed{seed}/samples/{model}/{dataset}.parquet).
# Each rule declares exactly the files it reads (maxk.workflow.targets) and hands them to its command.
from maxk.workflow import targets as T

ANALYSIS = config["analysis"]
#: (metrics pairs, samples pairs) the claims read
CLAIMS_PAIRS = T.claims_pairs(config)
#: the yardstick claims (analysis.claims.yardstick_temperatures), written by the claims job where configured
YARDSTICK = T.has_yardstick(config)
YARDSTICK_OUT = {"yardstick": P.yardstick("{seed}")} if YARDSTICK else {}
YARDSTICK_ACROSS = {"yardstick": P.across_seeds_yardstick()} if YARDSTICK else {}
#: figure 2's (model, dataset) pairs re-scored for the exact entropy (figures.entropy.rescore)
RESCORE_PAIRS = T.rescore_pairs(ANALYSIS)
ENTROPY_ESTIMATES = (
    {
        f"estimates_{ext}": report(
            P.entropy_estimates("{seed}", ext),
            caption="../report/analysis_entropy_estimates.rst",
            category="Figures",
        )
        for ext in ("csv", "md")
    }
    if RESCORE_PAIRS
    else {}
)


# Aggregation over small per-pair files takes seconds even at paper scale (every metric, table and
# test of the paper config: ~4 s, benchmarks/bench_analysis.py). On a cluster these ~80 jobs run in the
# Snakemake process itself rather than each waiting in the queue and starting Snakemake twice on a
# node. The estimator lab (Monte Carlo, minutes at paper size) stays a cluster job.
localrules:
    analysis_metrics,
    analysis_table,
    analysis_stats,
    analysis_figure_passk,
    analysis_figure_entropy,
    analysis_figure_maxk,
    analysis_claims,
    analysis_across_seeds,


rule analysis_metrics:
    input:
        P.scores("{seed}", "{model}", "{dataset}"),
    output:
        P.metrics("{seed}", "{model}", "{dataset}"),
    log:
        f"{SEED_LOGS}/analysis/metrics/{{model}}/{{dataset}}.log",
    benchmark:
        f"{SEED_BENCH}/analysis/metrics/{{model}}/{{dataset}}.tsv"
    conda:
        "../../envs/report.yaml"
    threads: threads_of("analysis_metrics")
    resources:
        **resources_of("analysis_metrics"),
    params:
        cfg=lambda wc: config_json("analysis_metrics"),
    shell:
        "maxk analyze metrics --config-json {params.cfg:q} --scores {input} --output {output} > {log} 2>&1"


rule analysis_table:
    input:
        lambda wc: T.metrics_files(T.table_pairs(ANALYSIS, wc.table), wc.seed),
    output:
        tex=report(
            P.table("{seed}", "{table}", "tex"),
            caption="../report/analysis_table.rst",
            category="Tables",
            subcategory="LaTeX",
        ),
        md=report(
            P.table("{seed}", "{table}", "md"),
            caption="../report/analysis_table.rst",
            category="Tables",
            subcategory="Markdown",
        ),
        csv=report(
            P.table("{seed}", "{table}", "csv"),
            caption="../report/analysis_table.rst",
            category="Tables",
            subcategory="CSV with bootstrap CIs",
        ),
    log:
        f"{SEED_LOGS}/analysis/tables/{{table}}.log",
    benchmark:
        f"{SEED_BENCH}/analysis/tables/{{table}}.tsv"
    conda:
        "../../envs/report.yaml"
    threads: threads_of("analysis_table")
    resources:
        **resources_of("analysis_table"),
    params:
        cfg=lambda wc: config_json("analysis_table"),
    shell:
        "maxk analyze tables --config-json {params.cfg:q} --seed {wildcards.seed} --metrics {input} "
        "--table {wildcards.table} --tex {output.tex} --md {output.md} --csv {output.csv} > {log} 2>&1"


rule analysis_stats:
    input:
        lambda wc: T.metrics_files(T.significance_pairs(ANALYSIS), wc.seed),
    output:
        csv=report(
            P.significance("{seed}", "csv"),
            caption="../report/analysis_stats.rst",
            category="Significance",
        ),
        json=P.significance("{seed}", "json"),
    log:
        f"{SEED_LOGS}/analysis/stats.log",
    benchmark:
        f"{SEED_BENCH}/analysis/stats.tsv"
    conda:
        "../../envs/report.yaml"
    threads: threads_of("analysis_stats")
    resources:
        **resources_of("analysis_stats"),
    params:
        cfg=lambda wc: config_json("analysis_stats"),
    shell:
        "maxk analyze stats --config-json {params.cfg:q} --seed {wildcards.seed} "
        "--metrics {input} --output {output.csv} > {log} 2>&1"


rule analysis_figure_passk:
    input:
        lambda wc: T.metrics_files(T.figure_pairs(ANALYSIS, "passk"), wc.seed),
    output:
        pdf=P.figure("{seed}", "passk_curve", "pdf"),
        png=report(
            P.figure("{seed}", "passk_curve", "png"),
            caption="../report/analysis_passk.rst",
            category="Figures",
        ),
    log:
        f"{SEED_LOGS}/analysis/figures/passk_curve.log",
    benchmark:
        f"{SEED_BENCH}/analysis/figures/passk_curve.tsv"
    conda:
        "../../envs/report.yaml"
    threads: threads_of("analysis_figure")
    resources:
        **resources_of("analysis_figure"),
    params:
        cfg=lambda wc: config_json("analysis_figure_passk"),
    shell:
        "maxk analyze figure passk --config-json {params.cfg:q} --seed {wildcards.seed} "
        "--metrics {input} --output {output.pdf} {output.png} > {log} 2>&1"


rule analysis_figure_entropy:
    input:
        samples=lambda wc: T.samples_files(T.figure_pairs(ANALYSIS, "entropy"), wc.seed),
        rescored=lambda wc: T.rescored_files(RESCORE_PAIRS, wc.seed),
    output:
        **ENTROPY_ESTIMATES,
        pdf=P.figure("{seed}", "entropy", "pdf"),
        png=report(
            P.figure("{seed}", "entropy", "png"),
            caption="../report/analysis_entropy.rst",
            category="Figures",
        ),
    log:
        f"{SEED_LOGS}/analysis/figures/entropy.log",
    benchmark:
        f"{SEED_BENCH}/analysis/figures/entropy.tsv"
    conda:
        "../../envs/report.yaml"
    threads: threads_of("analysis_figure")
    resources:
        **resources_of("analysis_figure"),
    params:
        cfg=lambda wc: config_json("analysis_figure_entropy"),
        estimates=lambda w, output: (
            f" --estimates-csv {output.estimates_csv} --estimates-md {output.estimates_md}"
            if RESCORE_PAIRS
            else ""
        ),
    shell:
        "maxk analyze figure entropy --config-json {params.cfg:q} --seed {wildcards.seed} "
        "--samples {input.samples} --rescored {input.rescored}{params.estimates} "
        "--output {output.pdf} {output.png} > {log} 2>&1"


rule analysis_figure_maxk:
    input:
        lambda wc: T.metrics_files(
            T.figure_pairs(ANALYSIS, "maxk_curves", wc.dataset), wc.seed
        ),
    output:
        pdf=P.figure("{seed}", "maxk_{dataset}", "pdf"),
        png=report(
            P.figure("{seed}", "maxk_{dataset}", "png"),
            caption="../report/analysis_maxk.rst",
            category="Figures",
        ),
    log:
        f"{SEED_LOGS}/analysis/figures/maxk_{{dataset}}.log",
    benchmark:
        f"{SEED_BENCH}/analysis/figures/maxk_{{dataset}}.tsv"
    conda:
        "../../envs/report.yaml"
    threads: threads_of("analysis_figure")
    resources:
        **resources_of("analysis_figure"),
    params:
        cfg=lambda wc: config_json("analysis_figure_maxk"),
    shell:
        "maxk analyze figure maxk --config-json {params.cfg:q} --seed {wildcards.seed} "
        "--metrics {input} --dataset {wildcards.dataset} "
        "--output {output.pdf} {output.png} > {log} 2>&1"


rule analysis_claims:
    input:
        metrics=lambda wc: T.metrics_files(CLAIMS_PAIRS[0], wc.seed),
        samples=lambda wc: T.samples_files(CLAIMS_PAIRS[1], wc.seed),
        train_metrics=lambda wc: T.run_curves(config, wc.seed),
        base_model=lambda wc: P.model_inputs(config, wc.seed, P.BASE),
    output:
        **YARDSTICK_OUT,
        csv=report(
            P.claims("{seed}", "csv"),
            caption="../report/analysis_claims.rst",
            category="Claims",
        ),
        md=report(
            P.claims("{seed}", "md"),
            caption="../report/analysis_claims.rst",
            category="Claims",
        ),
        differences=P.claim_differences("{seed}"),
        learning=P.learning("{seed}"),
    log:
        f"{SEED_LOGS}/analysis/claims.log",
    benchmark:
        f"{SEED_BENCH}/analysis/claims.tsv"
    conda:
        "../../envs/report.yaml"
    threads: threads_of("analysis_claims")
    resources:
        **resources_of("analysis_claims"),
    params:
        cfg=lambda wc: config_json("analysis_claims"),
        curve=lambda w, input: (
            f" --train-metrics {input.train_metrics}" if input.train_metrics else ""
        ),
        base=lambda w, input: (
            f" --base-model {input.base_model}" if input.base_model else ""
        ),
        yardstick=lambda w, output: (
            f" --yardstick {output.yardstick}" if YARDSTICK else ""
        ),
    shell:
        "maxk analyze claims --config-json {params.cfg:q} --seed {wildcards.seed} "
        "--metrics {input.metrics} --samples {input.samples}{params.curve}{params.base} "
        "--csv {output.csv} --md {output.md} --differences {output.differences} "
        "--learning {output.learning}{params.yardstick} > {log} 2>&1"


rule analysis_lab:
    output:
        onpolicy=report(
            P.lab("onpolicy.csv"),
            caption="../report/analysis_lab.rst",
            category="Estimator lab",
        ),
        offpolicy=P.lab("offpolicy.csv"),
        onpolicy_pdf=P.lab("onpolicy.pdf"),
        onpolicy_png=report(
            P.lab("onpolicy.png"),
            caption="../report/analysis_lab.rst",
            category="Estimator lab",
        ),
        offpolicy_pdf=P.lab("offpolicy.pdf"),
        offpolicy_png=report(
            P.lab("offpolicy.png"),
            caption="../report/analysis_lab_offpolicy.rst",
            category="Estimator lab",
        ),
        surrogate_pdf=P.lab("offpolicy_surrogate.pdf"),
        surrogate_png=report(
            P.lab("offpolicy_surrogate.png"),
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
        cfg=lambda wc: config_json("analysis_lab"),
        seed=config["seed"],
    shell:
        "maxk analyze lab --config-json {params.cfg:q} --seed {params.seed} "
        "--onpolicy {output.onpolicy} --offpolicy {output.offpolicy} "
        "--onpolicy-figure {output.onpolicy_pdf} {output.onpolicy_png} "
        "--offpolicy-figure {output.offpolicy_pdf} {output.offpolicy_png} "
        "--offpolicy-surrogate-figure {output.surrogate_pdf} {output.surrogate_png} > {log} 2>&1"


rule analysis_contamination:
    input:
        models=lambda wc: [
            P.model_path(config, wc.seed, m) for m in T.trained_models(config)
        ],
        data=lambda wc: T.contamination_data(config, wc.seed),
    output:
        csv=P.contamination("{seed}", "csv"),
        md=report(P.contamination("{seed}", "md"), category="Contamination"),
    log:
        f"{SEED_LOGS}/analysis/contamination.log",
    benchmark:
        f"{SEED_BENCH}/analysis/contamination.tsv"
    conda:
        "../../envs/report.yaml"
    threads: threads_of("analysis_contamination")
    resources:
        **resources_of("analysis_contamination"),
    params:
        trained_on=lambda wc, input: [f"{m}/{P.TRAINED_ON}" for m in input.models],
        audit=ANALYSIS["contamination"]["audit"],
        fail="--fail-on-overlap" if ANALYSIS["contamination"]["fail_on_overlap"] else "",
    shell:
        "maxk analyze contamination --trained-on {params.trained_on} --data {input.data} "
        "--audit {params.audit} --output {output.csv} --markdown {output.md} {params.fail} > {log} 2>&1"


# The claims across the seeds of config["replicates"] (requested only with more than one seed).
if "claims" in ANALYSIS:

    rule analysis_across_seeds:
        input:
            **T.across_seed_inputs(config),
        output:
            **YARDSTICK_ACROSS,
            csv=P.across_seeds("csv"),
            md=report(
                P.across_seeds("md"),
                caption="../report/analysis_across_seeds.rst",
                category="Claims",
            ),
            curves_pdf=P.across_seeds_figure("curves", "pdf"),
            curves_png=report(
                P.across_seeds_figure("curves", "png"),
                caption="../report/analysis_across_seeds.rst",
                category="Claims",
            ),
            claims_pdf=P.across_seeds_figure("claims", "pdf"),
            claims_png=report(
                P.across_seeds_figure("claims", "png"),
                caption="../report/analysis_across_seeds.rst",
                category="Claims",
            ),
        log:
            f"{LOGS}/analysis/across_seeds.log",
        benchmark:
            f"{BENCH}/analysis/across_seeds.tsv"
        conda:
            "../../envs/report.yaml"
        threads: threads_of("analysis_claims")
        resources:
            **resources_of("analysis_claims"),
        params:
            cfg=lambda wc: config_json("analysis_across_seeds"),
            seed=config["seed"],
            yardstick=lambda w, input, output: (
                f" --yardstick {input.yardstick} --yardstick-csv {output.yardstick}"
                if YARDSTICK
                else ""
            ),
        shell:
            "maxk analyze across-seeds --config-json {params.cfg:q} --seed {params.seed} "
            "--claims {input.claims} --differences {input.differences} --learning {input.learning} "
            "--metrics {input.metrics}{params.yardstick} "
            "--csv {output.csv} --md {output.md} "
            "--curves-figure {output.curves_pdf} {output.curves_png} "
            "--claims-figure {output.claims_pdf} {output.claims_png} > {log} 2>&1"
