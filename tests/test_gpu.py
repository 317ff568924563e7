"""A job that asked for GPUs and finds no usable CUDA stops at once, naming why (maxk.gpu).

CUDA is hidden here the way a too-old driver hides it: ``torch.cuda.is_available()`` is False (on this
CPU build it is anyway; the monkeypatch makes the test mean the same on a GPU machine).
"""

from __future__ import annotations

import json
import time
import warnings

import pytest
import torch

from maxk.cli import main
from maxk.gpu import STAND_IN_ENV, CudaUnavailableError, driver_version, require_cuda


@pytest.fixture
def no_cuda(monkeypatch):
    def unavailable() -> bool:
        message = "CUDA initialization: The NVIDIA driver on your system is too old (found version 11040)."
        warnings.warn(message, stacklevel=2)
        return False

    monkeypatch.setattr(torch.cuda, "is_available", unavailable)
    monkeypatch.delenv(STAND_IN_ENV, raising=False)


def test_driver_version_reads_both_kernel_module_formats(tmp_path):
    proprietary = tmp_path / "a"
    proprietary.write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
        "GCC version:  gcc version 11.4.0\n"
    )
    open_module = tmp_path / "b"
    open_module.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release\n")
    assert driver_version(proprietary) == "535.104.05"
    assert driver_version(open_module) == "550.54.15"
    assert driver_version(tmp_path / "missing") is None


def test_a_gpu_job_without_cuda_fails_naming_torch_driver_and_torch_s_warning(no_cuda):
    with pytest.raises(CudaUnavailableError) as err:
        require_cuda(8, "training run grpo")
    text = str(err.value)
    assert text.startswith("training run grpo asked for 8 GPU(s)")
    assert f"torch {torch.__version__}" in text and "NVIDIA driver" in text
    assert "driver on your system is too old (found version 11040)" in text


def test_a_cpu_job_and_the_rehearsal_s_stand_in_run_on(no_cuda, monkeypatch):
    assert require_cuda(0, "embedded run") is False
    monkeypatch.setenv(STAND_IN_ENV, "1")
    assert require_cuda(8, "rehearsed run") is False


def test_training_cli_stops_in_seconds_before_loading_the_model(no_cuda, tmp_path, capsys):
    data = tmp_path / "d.jsonl.gz"
    data.write_bytes(b"")
    config = {"seed": 1, "train": {}, "run": {"method": "grpo"}}
    argv = ["train", "--run", "r", "--config-json", json.dumps(config), "--model", str(tmp_path / "absent")]
    argv += ["--data", str(data), "--out", str(tmp_path / "o"), "--metrics", str(tmp_path / "m.csv")]
    start = time.monotonic()
    assert main([*argv, "--gpus", "8"]) == 1
    assert time.monotonic() - start < 60  # generous: the point is no model load and no training
    err = capsys.readouterr().err
    assert "training run r asked for 8 GPU(s)" in err and "absent" not in err
    assert main([*argv, "--gpus", "0"]) == 1  # without GPUs it goes on, to the missing model
    assert "absent" in capsys.readouterr().err


def test_generation_cli_stops_before_loading_the_model(no_cuda, tmp_path, capsys):
    problems = tmp_path / "p.jsonl"
    problems.write_text('{"id": "a/1", "prompt": "x"}\n')
    config = {"seed": 1, "generate": {"backend": "vllm"}}
    argv = ["generate", "--model-path", str(tmp_path / "absent"), "--problems", str(problems)]
    argv += ["--config-json", json.dumps(config), "--output", str(tmp_path / "o.parquet")]
    assert main([*argv, "--gpus", "1"]) == 1
    err = capsys.readouterr().err
    assert "generation of absent on p (vllm backend) asked for 1 GPU(s)" in err
