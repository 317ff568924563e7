"""The seam between the Snakemake rules and the package (where every file lives: ``maxk.paths``,
shared with the stages, which must not import this package: it sits above them all).

- ``targets``    the final outputs a config declares, and each analysis job's exact inputs
- ``slices``     the part of the config each rule's job depends on (its ``--config-json``)
- ``resources``  per-rule threads, memory and runtime, growing on retry up to the caps
- ``jobserver``  warm job starts: one pre-imported interpreter per local run forks each ``maxk`` job
- ``cli``        ``maxk provenance`` (the ``environment`` rule), ``maxk job-server``
"""
