"""Orchestration helpers used by the Snakemake rules (provenance, config checks)."""
