"""maxk: reproduce and extend "The Best of N Worlds" (max@k optimisation for RL on code).

Subpackages, one per pipeline stage:

- ``maxk.metrics``     unbiased pass@k / max@k estimators (numpy)
- ``maxk.estimators``  what each GRPO advantage estimator needs (torch-free: planning reads it)
- ``maxk.objectives``  registry of GRPO advantage estimators (torch)
- ``maxk.data``        dataset loaders, filters, splits, prompts, the embedded task suite
- ``maxk.sandbox``     isolated execution and scoring of generated programs
- ``maxk.train``       the embedded base model and GRPO training on TRL
- ``maxk.generate``    sampling n completions per problem (transformers / vLLM)
- ``maxk.analysis``    tables, figures, significance tests, the estimator lab
"""

__version__ = "0.1.0"
