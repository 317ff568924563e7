"""Analysis stage: per-problem pass@k / max@k, the paper's tables and figures, significance tests,
and the estimator lab (bias and variance of the advantage estimators on a toy policy).

Modules (each importable on its own; none imports torch at import time except ``lab``):

- ``per_problem`` scores -> ``[problems, n]`` reward matrix (ragged handling) -> per-problem
  pass@k / max@k for k in {1, 2, 4, ...}, and their Parquet files;
- ``stats``    bootstrap confidence intervals, Wilcoxon best-vs-second, Holm correction;
- ``tables``   table specs from config -> cells -> LaTeX (paper layout) / Markdown / CSV;
- ``figures``  figure 1 (pass@k vs k), figure 2 (entropy), max@k curves per dataset;
- ``lab``      the estimator lab;
- ``paths``    the Snakemake rules' inputs and targets from the config;
- ``cli``      ``maxk analyze {metrics,tables,stats,figures,lab}``.
"""
