"""Real models beside the scripted one: OpenAI-compatible Chat Completions and Anthropic Messages.

They need the `providers` extra (`pip install -e '.[providers]'`) only once a model is made: the
SDKs are imported then, so importing this package, and the request mapping, work without them.
"""

from course.runtime.providers.anthropic_messages import AnthropicModel
from course.runtime.providers.openai_chat import OpenAIChatModel

__all__ = ["AnthropicModel", "OpenAIChatModel"]
