"""Real models beside the scripted one: OpenAI-compatible Chat Completions and Anthropic Messages.

Both need the `providers` extra (`pip install -e '.[providers]'`); importing this package does not,
so `from course.providers import OpenAIChatModel` fails only when the SDK itself is missing.
"""

from __future__ import annotations

INSTALL_HINT = "the providers need the official SDKs: pip install -e '.[providers]'"


def __getattr__(name: str):
    # Each model imports only its own SDK, and only when it is asked for.
    if name == "OpenAIChatModel":
        from course.providers.openai_chat import OpenAIChatModel
        return OpenAIChatModel
    if name == "AnthropicModel":
        from course.providers.anthropic_messages import AnthropicModel
        return AnthropicModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
