"""Prompts: the prompt builder shared by training, generation and the base model's evaluation.

``build_messages(problem, config)`` gives the chat messages (system prompt + user turn holding the
statement and the per-format instruction) that the trainer and the generator share.
``build_prompt(problem, tokenizer, config=...)`` renders them with the tokenizer's chat template when it
has one (``apply_chat_template(..., add_generation_prompt=True, tokenize=False)``), otherwise with the
plain template of ``config["plain_template"]``.

The program a completion holds is ``maxk.generate.extract.extract_program`` (programs out).
"""

from __future__ import annotations

from typing import Any

from maxk.config import section_defaults


def _merged(config: dict[str, Any] | None) -> dict[str, Any]:
    """The ``prompt`` config section with every key it leaves out at its schema default."""
    cfg = section_defaults("prompt")
    if config:
        cfg.update({k: v for k, v in config.items() if v is not None and k != "instructions"})
        cfg["instructions"].update(config.get("instructions") or {})
    return cfg


def instruction_for(problem: dict[str, Any], config: dict[str, Any] | None = None) -> str:
    cfg = _merged(config)
    tests = problem["tests"]
    fmt = tests["format"]
    if fmt not in cfg["instructions"]:
        raise ValueError(f"problem {problem.get('id')!r}: no instruction for test format {fmt!r}")
    return cfg["instructions"][fmt].format(entry_point=tests.get("entry_point", ""))


def build_messages(problem: dict[str, Any], config: dict[str, Any] | None = None) -> list[dict[str, str]]:
    """Chat messages for ``problem``: optional system turn, then the user turn (statement + instruction)."""
    cfg = _merged(config)
    user = f"{problem['prompt'].rstrip()}\n\n{instruction_for(problem, cfg)}"
    messages = []
    if cfg["system"]:
        messages.append({"role": "system", "content": cfg["system"]})
    messages.append({"role": "user", "content": user})
    return messages


def build_prompt(
    problem: dict[str, Any], tokenizer: Any = None, *, config: dict[str, Any] | None = None
) -> str:
    """The prompt string for ``problem`` (chat template when the tokenizer has one, plain otherwise)."""
    cfg = _merged(config)
    if tokenizer is not None and cfg["use_chat_template"] and getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(
            build_messages(problem, cfg), add_generation_prompt=True, tokenize=False
        )
    return cfg["plain_template"].format(
        system=cfg["system"] or "",
        prompt=problem["prompt"].rstrip(),
        instruction=instruction_for(problem, cfg),
    )


# --------------------------------------------------------------------------- extraction
