"""The prompt section, typed from ``workflow/schemas/prompt.schema.yaml`` (``maxk.config.config_section``):
how a problem becomes a prompt (``maxk.data.prompts``)."""

from __future__ import annotations

from maxk.config import config_section


@config_section("prompt.instructions")
class Instructions:
    """The instruction appended to a statement, per test format (``{entry_point}`` filled in)."""

    stdio: str
    call: str


@config_section("prompt")
class PromptConfig:
    """How a problem becomes a prompt: system turn, instruction, chat template or plain template."""

    system: str
    instructions: Instructions
    plain_template: str
    use_chat_template: bool
