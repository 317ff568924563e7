"""Project-level checks: packaging, environments, CLI, atomic I/O, provenance, the DAG."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from maxk.io import atomic_open, read_jsonl, write_jsonl
from maxk.provenance import (
    CPU_KEYS,
    RECORD_KEYS,
    config_hash,
    cpu_description,
    cpu_label,
    provenance_record,
    write_provenance,
)

ROOT = Path(__file__).resolve().parents[1]
ENV_FILES = sorted((ROOT / "envs").glob("*.yaml"))  # one conda env per stage (cluster users)


def requirement_pins(reqs: list[str]) -> dict[str, str]:
    """name -> specifier, for requirements like 'torch==2.13.0' (extras and editable paths skipped)."""
    out = {}
    for req in reqs:
        m = re.match(r"^([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*([<>=!~].*)?$", req.strip())
        if m and not req.startswith("-"):
            out[m.group(1).lower().replace("_", "-")] = (m.group(3) or "").replace(" ", "")
    return out


def pyproject_pins() -> dict[str, str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    reqs = list(data["project"]["dependencies"])
    for extra in data["project"]["optional-dependencies"].values():
        reqs += [r for r in extra if not r.startswith("maxk")]
    return requirement_pins(reqs)


def env_pip(env: dict) -> list[str]:
    """The pip part of a conda environment file's dependencies."""
    return next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)


@pytest.mark.parametrize("env_file", ENV_FILES, ids=lambda p: p.name)
def test_conda_envs_parse_and_agree_with_pyproject(env_file: Path) -> None:
    env = yaml.safe_load(env_file.read_text())
    assert env["name"].startswith("maxk-")
    assert "python=3.11" in env["dependencies"]
    pip = env_pip(env)
    # the project is installed by the post-deploy script: a relative path cannot work from Snakemake's copy
    assert not any(r.startswith("-e") or "/" in r for r in pip), pip
    assert env_file.with_suffix(".post-deploy.sh").is_file(), "every stage env installs the maxk package"
    pins = pyproject_pins()
    env_pins = requirement_pins(pip)
    assert env_pins, env_file
    for name, spec in env_pins.items():
        assert name in pins, f"{env_file.name}: {name} is not declared in pyproject.toml"
        assert spec == pins[name], f"{env_file.name}: {name}{spec} but pyproject.toml has {name}{pins[name]}"


GPU_ONLY = ("vllm", "deepspeed")  # never installed here (CI); the rest of each pip part is


#: the stage env with the most pip requirements: the one installed below (an install costs most of a
#: minute of CI, and the post-deploy step it proves is the same script for every env)
LARGEST_ENV = max(ENV_FILES, key=lambda p: len(env_pip(yaml.safe_load(p.read_text()))))


def test_every_stage_env_installs_the_project_by_one_script() -> None:
    """So installing one stage's environment (below) proves the post-deploy step of all of them; what
    differs between them, the pip part, is checked against pyproject.toml above."""
    scripts = {p.name: p.read_bytes() for p in (ROOT / "envs").glob("*.post-deploy.sh")}
    assert len(scripts) == len(ENV_FILES) > 1
    assert len(set(scripts.values())) == 1, sorted(scripts)


@pytest.mark.parametrize("env_file", [LARGEST_ENV], ids=lambda p: p.name)
def test_conda_env_installs_the_project_from_snakemake_s_copy(env_file: Path, tmp_path: Path) -> None:
    """As `--sdm conda` does it: the env file and its post-deploy script are copied to
    .snakemake/conda/<hash>.yaml and <hash>.post-deploy.sh; conda creates the environment (a venv stands
    in, seeing this venv's packages for the conda-forge and pip parts, never the project itself); pip
    installs the pip part from a requirements file beside the copy, in that directory; Snakemake runs the
    copied post-deploy script in the environment, from another directory. Then the stage's entry point
    must import from it."""
    import venv

    conda = tmp_path / "work" / ".snakemake" / "conda"
    conda.mkdir(parents=True)
    prefix = conda / "0123abcd"
    (conda / "0123abcd.yaml").write_text(env_file.read_text())
    deploy = conda / "0123abcd.post-deploy.sh"
    deploy.write_text(env_file.with_suffix(".post-deploy.sh").read_text())
    venv.create(prefix, with_pip=True)
    python = prefix / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    ours = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    Path(site, "ci_packages.pth").write_text(ours + "\n")  # a path, not its .pth files: no maxk from here
    # ensurepip's old setuptools would shadow ours (torch asks for >= 77)
    subprocess.run(
        [python, "-m", "pip", "uninstall", "-q", "-y", "setuptools"], check=True, capture_output=True
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{prefix / 'bin'}:{env['PATH']}"
    assert subprocess.run([python, "-c", "import maxk"], env=env, cwd=tmp_path).returncode != 0
    pip = env_pip(yaml.safe_load(env_file.read_text()))
    reqs = conda / "condaenv.requirements.txt"
    reqs.write_text("".join(r + "\n" for r in pip if not r.startswith(GPU_ONLY)))
    done = subprocess.run([python, "-m", "pip", "install", "--no-index", "-q", "-r", reqs.name],
                          cwd=conda, env=env, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    env["MAXK_WORKFLOW_DIR"] = str(ROOT)
    done = subprocess.run(
        ["bash", str(deploy)], cwd=tmp_path / "work", env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = subprocess.run([prefix / "bin" / "maxk", "--help"], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and "score" in out.stdout, out.stderr[-2000:]
    where = subprocess.run([python, "-c", "import maxk; print(maxk.__file__)"], env=env, cwd=tmp_path,
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert where.startswith(str(ROOT / "src"))


def test_snakefile_exports_the_workflow_dir_the_post_deploy_scripts_read() -> None:
    assert "os.environ.update(MAXK_WORKFLOW_DIR=workflow.basedir)" in (ROOT / "Snakefile").read_text()
    for script in (ROOT / "envs").glob("*.post-deploy.sh"):
        assert "${MAXK_WORKFLOW_DIR:?" in script.read_text(), script.name


def test_gpu_packages_stay_out_of_the_ci_install() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    core_and_test = data["project"]["dependencies"] + data["project"]["optional-dependencies"]["test"]
    assert not any(r.startswith(("vllm", "deepspeed")) for r in core_and_test)
    assert any(r.startswith("vllm") for r in data["project"]["optional-dependencies"]["gpu"])


# What each vLLM release requires of the two packages we pin (torch, transformers), read from the
# METADATA of its x86_64 wheel on PyPI on 2026-11-25 (PEP 658 .metadata files; 0.30+ from the wheel).
VLLM_REQUIRES = {  # releases: (torch, transformers)
    ("0.22.0", "0.22.1", "0.23.0"): ("==2.11.0", ">=4.56.0,!=5.0.*,!=5.1.*,!=5.2.*,!=5.3.*,!=5.4.*,!=5.5.0"),
    ("0.24.0", "0.25.0", "0.25.1", "0.26.0"): ("==2.11.0", ">=5.5.3"),
    ("0.27.0", "0.27.1", "0.28.0"): ("==2.13.0", ">=5.5.3"),
    ("0.29.0", "0.30.0"): ("==2.13.0", ">=5.10.4"),
    ("0.31.0",): ("==2.13.0", ">=5.10.4,<5.18.0"),
}


def test_vllm_range_admits_exactly_the_releases_our_torch_and_transformers_pins_allow() -> None:
    from packaging.specifiers import SpecifierSet

    pins = pyproject_pins()
    torch, transformers = pins["torch"].removeprefix("=="), pins["transformers"].removeprefix("==")
    table = {v: needs for versions, needs in VLLM_REQUIRES.items() for v in versions}
    works = {
        v for v, (t, tf) in table.items() if torch in SpecifierSet(t) and transformers in SpecifierSet(tf)
    }
    admitted = {v for v in table if v in SpecifierSet(pins["vllm"])}
    assert admitted == works, f"vllm{pins['vllm']} admits {sorted(admitted)}; these work: {sorted(works)}"
    # trl's own vllm extra (trl 1.16: >=0.22.0,<=0.31.0) must contain ours
    assert all(v in SpecifierSet(">=0.22.0,<=0.31.0") for v in admitted)


def test_readme_test_command_is_what_ci_runs() -> None:
    """The README's command is .ci/run's, which runs it as a user (itself one, or one it creates)."""
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    (command,) = re.findall(r"^TEST='(.+)'$", ci, flags=re.MULTILINE)
    assert command in readme
    assert "pytest" in command and 'pip install -e ".[test]"' in command
    assert ci.count('eval "$TEST"') == 1 and ci.count('&& $TEST"') == 1, "both branches run the command"


def test_no_test_times_a_slow_machine_out() -> None:
    """A test bounds what may hang by the one hang guard (tests/guard.py), never by a number of its own
    a loaded machine can reach; pytest-timeout's per-test limit is the same guard. (The sandbox's tests
    pass time limits that are the sandbox's own behaviour under test: they are exempt.)"""
    from guard import HANG_GUARD_S

    pytest_options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert pytest_options["timeout"] == HANG_GUARD_S
    numeric = re.compile(r"\btimeout\s*=\s*\d|mark\.timeout\(")
    offenders = [
        f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if "sandbox" not in path.relative_to(ROOT / "tests").parts
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if numeric.search(line)
    ]
    assert not offenders, offenders


def test_cli_help_lists_stages() -> None:
    out = subprocess.run([sys.executable, "-m", "maxk", "--help"], capture_output=True, text=True, check=True)
    assert "provenance" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "maxk", "no-such-command"], capture_output=True, text=True)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_atomic_open_publishes_only_on_success(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl.gz"
    with pytest.raises(RuntimeError), atomic_open(target) as fh:
        fh.write("partial\n")
        raise RuntimeError("killed")
    assert not target.exists() and not list(tmp_path.iterdir())
    write_jsonl(target, [{"b": 1, "a": "x"}, {"c": None}])
    first = target.read_bytes()
    write_jsonl(target, [{"b": 1, "a": "x"}, {"c": None}])
    assert target.read_bytes() == first  # gzip mtime fixed: byte-identical reruns
    assert [row for _, row in read_jsonl(target)] == [{"a": "x", "b": 1}, {"c": None}]
    assert target.stat().st_mode & 0o777 == 0o666 & ~_umask()  # as open() would, not mkstemp's 0600


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_read_jsonl_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": 1}\n{oops\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: not valid JSON"):
        list(read_jsonl(bad))


def test_provenance(tmp_path: Path) -> None:
    cfg = {"seed": 3, "b": [1, 2]}
    assert config_hash(cfg) == config_hash({"b": [1, 2], "seed": 3})
    assert config_hash(cfg) != config_hash({"seed": 4, "b": [1, 2]})
    rec = provenance_record(cfg, seeds={"seed": 3})
    assert tuple(rec) == RECORD_KEYS and tuple(rec["cpu"]) == CPU_KEYS  # what docs/outputs.md lists
    assert tuple(provenance_record(instrument={"works": True})) == (*RECORD_KEYS, "instrument")
    assert rec["packages"]["numpy"] and rec["config_hash"] == config_hash(cfg)
    import torch  # loaded: the record names the instruction set torch's CPU kernels use

    assert provenance_record()["cpu"]["torch_capability"] == torch.backends.cpu.get_cpu_capability()
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t: fpu\n")
    assert cpu_description(info)["model"] == "Intel(R) Xeon(R) Processor"
    path = write_provenance(tmp_path / "model_dir", config=cfg)
    assert path == tmp_path / "model_dir" / "provenance.json"
    assert json.loads(path.read_text())["seeds"] is None
    f = tmp_path / "scores.parquet"
    f.write_text("x")
    assert write_provenance(f, config=cfg).name == "scores.parquet.provenance.json"


#: two processor blocks of a KVM guest's /proc/cpuinfo (the fields the description reads, and others)
XEON_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
stepping\t: 8
microcode\t: 0xffffffff
flags\t\t: fpu avx fma avx2 avx512f avx512_bf16 hypervisor amx_bf16 amx_tile
bugs\t\t: spectre_v1

processor\t: 1
vendor_id\t: AuthenticAMD
model name\t: not the first block
"""


def test_cpu_description_reads_the_first_processor_block(tmp_path: Path, monkeypatch) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(XEON_CPUINFO)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    cpu = cpu_description(info)
    assert {k: cpu[k] for k in ("model", "vendor", "family", "model_number", "stepping", "microcode")} == {
        "model": "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz", "vendor": "GenuineIntel", "family": 6,
        "model_number": 143, "stepping": 8, "microcode": "0xffffffff",
    }  # fmt: skip
    assert cpu["isa"] == [
        "avx",
        "fma",
        "avx2",
        "avx512f",
        "avx512_bf16",
        "amx_tile",
        "amx_bf16",
    ]  # ISA_FLAGS order
    assert cpu["hypervisor"] is True and cpu["aten_cpu_capability"] == "avx2" and cpu["logical_cpus"] >= 1
    assert cpu_label(cpu) == (
        "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz (GenuineIntel family 6 model 143 stepping 8; "
        "AVX-512, AMX; ATEN_CPU_CAPABILITY=avx2)"
    )
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
                    "model name\t: AMD EPYC 9B14\nflags\t\t: avx avx2\n")  # fmt: skip
    amd = cpu_description(info)
    assert amd["stepping"] is None and amd["microcode"] is None and amd["hypervisor"] is False
    assert cpu_label(amd) == "AMD EPYC 9B14 (AuthenticAMD family 25 model 17; AVX2)"


def test_cpu_label_of_records_written_before_the_finer_fields() -> None:
    assert cpu_label({"model": "Intel(R) Xeon(R) Processor", "torch_capability": "AVX512"}) == (
        "Intel(R) Xeon(R) Processor"
    )
    assert cpu_label({}) is None and cpu_label({"model": None, "vendor": "GenuineIntel"}) is None


def test_cpu_description_without_cpuinfo(tmp_path: Path) -> None:
    cpu = cpu_description(tmp_path / "absent")
    assert cpu["vendor"] is None and cpu["isa"] == [] and cpu["hypervisor"] is None


def snakemake(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True, env=env
    )


def test_default_dag_dry_runs() -> None:
    res = snakemake("-n", "--forceall", "--cores", "1", "--quiet", "rules")
    assert res.returncode == 0, res.stderr
    assert "environment" in res.stdout + res.stderr


def test_config_typo_fails_before_any_job(tmp_path: Path) -> None:
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["seeed"] = 1
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    res = snakemake("-n", "--cores", "1", "--configfile", str(bad))
    assert res.returncode != 0
    assert "seeed" in res.stdout + res.stderr
    assert "Additional properties are not allowed" in res.stdout + res.stderr


def test_workflow_lint_and_format_are_clean() -> None:
    lint = snakemake("--lint")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = subprocess.run(
        [Path(sys.executable).with_name("snakefmt"), "--check", "Snakefile", "workflow/"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_default_profile_reruns_interrupted_jobs_and_nothing_more() -> None:
    """profiles/default applies to every run: a killed job's partial outputs must be redone, not block."""
    prof = yaml.safe_load((ROOT / "profiles" / "default" / "config.yaml").read_text())
    assert prof == {"rerun-incomplete": True}


def test_data_modules_do_not_import_each_other_in_a_cycle() -> None:
    """build (the pipeline) and hub (the loaders) share maxk.data.source, not each other's internals."""
    import ast

    def imported(path: Path) -> set[str]:
        tree = ast.parse(path.read_text())
        return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}

    data = ROOT / "src" / "maxk" / "data"
    assert "maxk.data.build" not in imported(data / "hub.py")
    assert "maxk.data.source" in imported(data / "hub.py") and "maxk.data.source" in imported(
        data / "build.py"
    )


#: The house's floors, bottom up: a stage may import the stages below it and the shared top-level
#: modules (maxk.paths, maxk.config, maxk.seeds, ...), never a stage above it; maxk.workflow (the
#: rules' seam) sits above every stage.
LAYERS = ("data", "sandbox", "generate", "train", "analysis", "workflow")


def _maxk_imports(path: Path) -> list[tuple[str, int]]:
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names if node.module == "maxk"]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found += [(name, node.lineno) for name in names if name.startswith("maxk.")]
    return found


def test_no_module_imports_a_later_stage() -> None:
    """Issue 27: arrows run down the house only (module-level and in-function imports alike)."""
    src = ROOT / "src" / "maxk"
    upward = []
    for path in sorted(src.rglob("*.py")):
        parts = path.relative_to(src).parts
        own = parts[0] if len(parts) > 1 else None
        for name, line in _maxk_imports(path):
            target = name.split(".")[1]
            if own in LAYERS and target in LAYERS and LAYERS.index(target) > LAYERS.index(own):
                upward.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
            # the command line and its reference pages (maxk.docs) stand above every stage
            if own is None and target in LAYERS and path.name not in ("cli.py", "__main__.py", "docs.py"):
                upward.append(f"{path.relative_to(ROOT)}:{line} (shared) imports the stage {name}")
    assert upward == []
    # the check sees both spellings of an import of the rules' seam
    assert _maxk_imports_of("from maxk.workflow import slices\n") == [("maxk.workflow", 1)]
    assert ("maxk.workflow", 2) in _maxk_imports_of("import os\nfrom maxk import paths, workflow\n")


def _maxk_imports_of(code: str) -> list[tuple[str, int]]:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(code)
    try:
        return _maxk_imports(Path(fh.name))
    finally:
        os.unlink(fh.name)


CAPTIONS = sorted((ROOT / "workflow" / "report").glob("*.rst"))


@pytest.mark.parametrize("caption", CAPTIONS, ids=lambda p: p.name)
def test_report_captions_render_without_docutils_warnings(caption: Path) -> None:
    """`snakemake --report` renders each caption with docutils (after Jinja, which leaves the text
    between its tags alone); a warning reaches the user's terminal, e.g. an unescaped |x| is a
    substitution reference."""
    import io

    import docutils.core

    text = re.sub(r"{{.*?}}", "x", caption.read_text(), flags=re.S)  # Jinja's expressions, rendered
    warnings = io.StringIO()
    docutils.core.publish_string(text, writer="html", settings_overrides={"warning_stream": warnings})
    assert warnings.getvalue() == "", warnings.getvalue()
