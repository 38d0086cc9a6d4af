"""The chapter 07 opening example: ask for README.md, read it, answer with the project name.

The read tool here is the chapter's in-memory stand-in (chapter 08 builds the real one).
"""

from __future__ import annotations

from course.runtime.messages import AssistantMessage, ToolCall, text, tool_call, user_message
from course.runtime.scripted import answer
from course.runtime.tools import Tool, ToolExecutionContext, ToolOutput

SYSTEM_PROMPT = "You are tiny-pi, a small agent runtime."
QUESTION = "请读取 README.md，并告诉我项目名。"
README = "# tiny-pi\nA small agent runtime."

READ_PARAMETERS = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "File to read, relative to the workspace"}},
    "required": ["path"],
    "additionalProperties": False,
}


def read_call(call_id: str = "call-1", path: str = "README.md") -> ToolCall:
    return tool_call(call_id, "read", {"path": path})


# The scripted answers carry no clock reading until the model streams them (course.runtime.scripted.answer),
# so the round trip's timestamps are the chapter's: user 1, first answer 2, readResult 3, final answer 4.
def first_answer() -> AssistantMessage:
    return answer([text("我先读取项目说明。"), read_call()], "toolUse")


def final_answer() -> AssistantMessage:
    return answer([text("项目名是 tiny-pi。")], "stop")


def context() -> dict:
    return {"systemPrompt": SYSTEM_PROMPT, "messages": [user_message(QUESTION)]}


def memory_read_tool(files: dict[str, str] | None = None) -> Tool:
    """A `read` that serves fixed contents from memory (README.md by default)."""
    files = {"README.md": README} if files is None else files

    async def execute(arguments: dict, context: ToolExecutionContext) -> ToolOutput:
        path = arguments["path"]
        if path not in files:
            raise FileNotFoundError(f"No such file: {path}")
        return {"content": [text(files[path])]}

    return Tool(name="read", description="Read a text file from the workspace.", parameters=READ_PARAMETERS,
                execute=execute)


def answer_from_read_result(request: dict) -> AssistantMessage:
    """The final answer as a function of the second request: the project name is the title of the
    README text the read tool returned, so the answer depends on the file actually read."""
    result = request["messages"][-1]
    body = "\n".join(block["text"] for block in result["content"] if block["type"] == "text")
    if result["isError"]:
        return answer([text(f"读取失败：{body}")], "stop")
    title = next((line[2:].strip() for line in body.splitlines() if line.startswith("# ")), None)
    if title is None:
        return answer([text("README.md 里没有标题。")], "stop")
    return answer([text(f"项目名是 {title}。")], "stop")
