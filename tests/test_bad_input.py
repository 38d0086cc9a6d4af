"""Bad input at the edges (issue 16): a model's broken arguments, a caller's mistakes and values no
transcript may hold each have a defined outcome, and the checker and the renderer never raise.

The provider side (the same cases over real HTTP, retries, time budget) is tests/test_providers_faults.py.
"""

import asyncio
import copy

import pytest

from checkpoints.ch06_tool_execution import execute_tool_call
from checkpoints.ch07_agent_loop import AgentLoopOptions, run_agent_loop
from course.judge.invariants import check_run
from course.judge.timeline import render_run
from course.recorder.harness import load_checkpoint, run_loop
from course.runtime import readme_example as readme
from course.runtime.messages import MAX_DEPTH, assistant_message, strict_json, text, tool_call, tool_result, user_message
from course.runtime.providers.streaming import final_arguments
from course.runtime.scripted import ScriptedModel
from course.runtime.stream import AssistantMessageEventStream
from course.runtime.tools import Registry, Tool, ToolExecutionContext


def nested(depth, leaf=1):
    """A value `depth` lists deep."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


DEEP = nested(10_000)
SURROGATE = "\ud800"


def tool(name, execute, parameters=None):
    return Tool(name=name, description=f"the {name} tool", execute=execute,
                parameters=parameters or {"type": "object", "properties": {}})


def one_call_then_stop(call):
    return ScriptedModel([assistant_message([call], "toolUse"), assistant_message([text("好的。")], "stop")])


def counting_read_tool(ran):
    async def execute(arguments, context):
        ran.append(arguments)
        return {"content": [text("# tiny-pi")]}
    return Tool("read", "Read a file.", readme.READ_PARAMETERS, execute)


# --- strict_json: what a transcript may hold -------------------------------------------------

@pytest.mark.parametrize("value, why", [
    (SURROGATE, "it holds \\ud800, a lone surrogate, which is not UTF-8 text"),
    ({"text": "ok" + "\udfff"}, "it holds \\udfff, a lone surrogate, which is not UTF-8 text"),
    (DEEP, f"it is nested deeper than {MAX_DEPTH} levels"),
    (nested(MAX_DEPTH + 1), f"it is nested deeper than {MAX_DEPTH} levels"),
    ({"a": nested(MAX_DEPTH)}, f"it is nested deeper than {MAX_DEPTH} levels"),
], ids=["lone_surrogate", "low_surrogate_in_a_dict", "10000_deep", "one_past_the_limit", "past_it_inside_a_dict"])
def test_strict_json_refuses_what_no_provider_or_terminal_accepts(value, why):
    with pytest.raises(ValueError) as raised:
        strict_json(value)
    assert str(raised.value) == why


def test_strict_json_takes_the_limit_itself_and_any_text():
    assert strict_json(nested(MAX_DEPTH)) == "[" * MAX_DEPTH + "1" + "]" * MAX_DEPTH
    assert strict_json({"t": "项目 😀 \u00e9"}) == '{"t": "项目 😀 \u00e9"}'


# --- final arguments ----------------------------------------------------------------------------

@pytest.mark.parametrize("raw, arguments, why", [
    ('{"path": "README.md"}', {"path": "README.md"}, None),
    ("", {}, None),
    ("  ", {}, None),
    ('{"path": READ', {}, "Expecting value at character 10"),
    ('["README.md"]', {}, "a JSON array, not an object"),
    ('"README.md"', {}, "a JSON string, not an object"),
    ("null", {}, "a JSON null, not an object"),
    ('{"path":"README.md","limit":1', {}, "cut short before its JSON ended"),
    ('{"path":"README.md","limit":"tw', {}, "cut short before its JSON ended"),
    ('{"pa', {}, "cut short before its JSON ended"),
    ('{"path":"a"} trailing', {}, "Extra data at character 14"),
    ('{"n": NaN}', {}, "NaN is not JSON"),
    ('{"n": Infinity}', {}, "Infinity is not JSON"),
    ('{"p": "\\ud800"}', {}, "it holds \\ud800, a lone surrogate, which is not UTF-8 text"),
    ("[" * 10_000, {}, f"it is nested deeper than {MAX_DEPTH} levels"),
    ('{"a":' * 10_000 + "1" + "}" * 10_000, {}, f"it is nested deeper than {MAX_DEPTH} levels"),
])
def test_providers_final_arguments_are_a_complete_object_or_say_why_not(raw, arguments, why):
    pytest.importorskip("jiter", reason="the providers extra parses streamed arguments with jiter")
    assert final_arguments(raw) == (arguments, why)


# --- the chapter 06 executor --------------------------------------------------------------------

@pytest.mark.asyncio
@pytest.mark.parametrize("call, why", [
    ({**tool_call("c", "read", {}), "argumentsError": "Expecting value at character 10",
      "argumentsText": '{"path": READ'}, "Expecting value at character 10"),
    ({**tool_call("c", "read", {}), "argumentsError": "cut short before its JSON ended",
      "argumentsText": '{"path": "README.md"'}, "cut short before its JSON ended"),
    (tool_call("c", "read", {"path": "README.md", "x": DEEP}), f"it is nested deeper than {MAX_DEPTH} levels"),
    (tool_call("c", "read", {"path": SURROGATE}), "it holds \\ud800, a lone surrogate, which is not UTF-8 text"),
], ids=["not_json", "cut_short", "deep", "lone_surrogate"])
async def test_arguments_that_are_not_valid_json_never_run_the_tool(call, why):
    ran = []
    result = await execute_tool_call(call, Registry([counting_read_tool(ran)]), ToolExecutionContext())
    assert ran == []
    assert (result["isError"], result["toolCallId"]) == (True, "c")
    assert result["content"] == [text(f"Invalid arguments for tool read: the arguments are not valid JSON ({why})")]


@pytest.mark.asyncio
async def test_an_argument_error_wins_even_over_arguments_that_fit_the_schema():
    call = {**tool_call("c", "read", {"path": "README.md"}), "argumentsError": "cut short before its JSON ended",
            "argumentsText": '{"path": "README.md", "limit": 1'}
    ran = []
    result = await execute_tool_call(call, Registry([counting_read_tool(ran)]), ToolExecutionContext())
    assert ran == [] and result["isError"]


BAD_OUTPUT = {
    "surrogate_in_content": ({"content": [text("ok" + SURROGATE)]},
                             "it holds \\ud800, a lone surrogate, which is not UTF-8 text"),
    "deep_details": ({"content": [text("ok")], "details": DEEP}, f"it is nested deeper than {MAX_DEPTH} levels"),
    "details_past_the_limit": ({"content": [text("ok")], "details": nested(MAX_DEPTH)},
                               f"it is nested deeper than {MAX_DEPTH} levels"),
}


@pytest.mark.asyncio
@pytest.mark.parametrize("where", list(BAD_OUTPUT))
async def test_tool_output_no_transcript_may_hold_becomes_an_error_result(where):
    output, why = BAD_OUTPUT[where]

    async def execute(arguments, context):
        return output

    ch07 = load_checkpoint("ch07_agent_loop")
    run = await run_loop(ch07, model=one_call_then_stop(tool_call("call-1", "odd", {})), context=readme.context(),
                         tools=Registry([tool("odd", execute)]))
    assert run.messages[2]["content"] == [text(f"Tool odd returned output that is not JSON: {why}")]
    assert (run.messages[2]["isError"], run.reason, run.problems) == (True, "stop", [])
    run.render().encode("utf-8")


@pytest.mark.asyncio
@pytest.mark.parametrize("details, why", [
    ({"x": SURROGATE}, "it holds \\ud800, a lone surrogate, which is not UTF-8 text"),
    (DEEP, f"it is nested deeper than {MAX_DEPTH} levels"),
])
async def test_an_executor_answer_no_transcript_may_hold_becomes_an_error_result(details, why):
    async def executor(call, context):
        return tool_result(call, [text("ok")], details=details)

    ch07 = load_checkpoint("ch07_agent_loop")
    run = await run_loop(ch07, model=one_call_then_stop(readme.read_call()), context=readme.context(),
                         tools=Registry([readme.memory_read_tool()]), execute_tool_call=executor)
    assert run.messages[2]["content"] == [text(f"Executor returned a result for call call-1 that is not JSON: {why}")]
    assert (run.reason, run.problems) == ("stop", [])


@pytest.mark.asyncio
@pytest.mark.parametrize("content, why", [
    ([text("项目" + SURROGATE)], "it holds \\ud800, a lone surrogate, which is not UTF-8 text"),
    ([tool_call("call-1", "read", {"path": DEEP})], f"it is nested deeper than {MAX_DEPTH} levels"),
], ids=["surrogate_text", "deep_arguments"])
async def test_a_model_message_no_transcript_may_hold_ends_the_answer_with_an_error(content, why):
    ch07 = load_checkpoint("ch07_agent_loop")
    model = AnswersWith(assistant_message(content, "toolUse"))
    run = await run_loop(ch07, model=model, context=readme.context(), tools=Registry([readme.memory_read_tool()]))
    assert (run.reason, run.executions, run.problems) == ("error", [], [])
    assert run.messages[-1]["errorMessage"] == f"Model returned a message that is not JSON: {why}"
    run.render().encode("utf-8")


class AnswersWith:
    """A model whose stream ends with `message` as it is (ScriptedModel would copy and stream it first)."""

    def __init__(self, message):
        self.message, self.requests = message, []

    def stream(self, request, *, signal=None):
        self.requests.append(copy.deepcopy(request))

        async def events():
            yield {"type": "start"}
            yield {"type": "done", "reason": self.message["stopReason"], "message": self.message}
        return AssistantMessageEventStream(events())


# --- the loop's inputs --------------------------------------------------------------------------

class NoStream:
    pass


def options(**changes):
    settings = {"model": ScriptedModel([readme.final_answer()]), "context": readme.context(),
                "tools": Registry([readme.memory_read_tool()])}
    return AgentLoopOptions(**{**settings, **changes})


def changed_schema_tool():
    read = counting_read_tool([])
    read.parameters = copy.deepcopy(read.parameters)  # README's own schema is shared: this test changes its copy
    read.__post_init__()
    registry = Registry([read])
    read.parameters["properties"]["path"]["type"] = "integer"  # after the Tool and its Registry were made
    return registry


def swapped_schema_tool():
    read = counting_read_tool([])
    read.parameters = {"type": "object", "properties": {"path": {"type": "nonsense"}}}
    return Registry([read])


BAD_OPTIONS = {
    "options_not_options": (lambda: {"model": None}, TypeError,
                            "options must be an AgentLoopOptions, got dict (it has no model, context, tools, signal, "
                            "max_steps, execute_tool_call, on_event)"),
    "context_not_a_dict": (lambda: options(context=[]), TypeError,
                           "context must be a dict with 'systemPrompt' and 'messages', got list"),
    "no_messages": (lambda: options(context={"systemPrompt": "s"}), ValueError,
                    "context has no 'messages': it needs 'systemPrompt' (a string) and 'messages' (a list)"),
    "no_system_prompt": (lambda: options(context={"messages": []}), ValueError,
                         "context has no 'systemPrompt': it needs 'systemPrompt' (a string) and 'messages' (a list)"),
    "system_prompt_not_text": (lambda: options(context={"systemPrompt": None, "messages": []}), TypeError,
                               "context['systemPrompt'] must be a string, got NoneType"),
    "messages_a_string": (lambda: options(context={"systemPrompt": "s", "messages": "hi"}), TypeError,
                          "context['messages'] must be a list of message dicts, got str"),
    "message_not_a_dict": (lambda: options(context={"systemPrompt": "s", "messages": ["hi"]}), TypeError,
                           "context['messages'][0] is str, not a message dict"),
    "unknown_role": (lambda: options(context={"systemPrompt": "s", "messages": [{"role": "system", "content": "x"}]}),
                     TypeError, "context['messages'][0] has role 'system'; a message's role is 'user', "
                                "'assistant' or 'toolResult'"),
    "user_without_content": (lambda: options(context={"systemPrompt": "s", "messages": [{"role": "user"}]}),
                             TypeError, "context['messages'][0] (a user message) must have 'content': a string or "
                                        "a list of text blocks"),
    "result_without_id": (lambda: options(context={"systemPrompt": "s", "messages": [
        {"role": "toolResult", "toolName": "read", "content": [], "isError": False}]}), TypeError,
        "context['messages'][0] (a toolResult message) must have 'toolCallId' as str"),
    "call_with_string_arguments": (lambda: options(context={"systemPrompt": "s", "messages": [
        assistant_message([{"type": "toolCall", "id": "c", "name": "read", "arguments": "{}"}], "toolUse")]}),
        TypeError, "context['messages'][0] (an assistant message) has content[0] that is neither a text block nor "
                   "a toolCall block with a string id, a string name and arguments as a dict"),
    "deep_message": (lambda: options(context={"systemPrompt": "s", "messages": [
        user_message("hi"), assistant_message([tool_call("c", "read", {"x": DEEP})], "toolUse")]}), ValueError,
        f"context['messages'][1] cannot be sent to a model: it is nested deeper than {MAX_DEPTH} levels"),
    "surrogate_in_message": (lambda: options(context={"systemPrompt": "s", "messages": [user_message(SURROGATE)]}),
                             ValueError, "context['messages'][0] cannot be sent to a model: it holds \\ud800, "
                                         "a lone surrogate, which is not UTF-8 text"),
    "surrogate_in_system_prompt": (lambda: options(context={"systemPrompt": SURROGATE, "messages": []}), ValueError,
                                   "context['systemPrompt'] cannot be sent to a model: it holds \\ud800, "
                                   "a lone surrogate, which is not UTF-8 text"),
    "model_without_stream": (lambda: options(model=NoStream()), TypeError,
                             "model must have a stream(request, *, signal) method; NoStream has none"),
    "tools_a_list": (lambda: options(tools=[readme.memory_read_tool()]), TypeError,
                     "tools must be a Registry, got list"),
    "schema_changed_after_made": (lambda: options(tools=changed_schema_tool()), ValueError,
                                  "tools: the parameters schema of tool read changed after the Tool and its "
                                  "Registry were made; make them again"),
    "schema_swapped_for_an_invalid_one": (lambda: options(tools=swapped_schema_tool()), ValueError,
                                          "tools: tool read has an invalid parameters schema: 'nonsense' is not "
                                          "valid under any of the given schemas"),
    "signal_not_a_signal": (lambda: options(signal="stop"), TypeError, "signal must be an AbortSignal or None, got str"),
    "executor_not_callable": (lambda: options(execute_tool_call=3), TypeError,
                              "execute_tool_call must be callable or None, got int"),
    "observer_not_callable": (lambda: options(on_event="print"), TypeError,
                              "on_event must be callable or None, got str"),
    "max_steps_zero": (lambda: options(max_steps=0), ValueError, "max_steps must be a positive integer, got 0"),
}


@pytest.mark.asyncio
@pytest.mark.parametrize("case", list(BAD_OPTIONS))
async def test_the_loop_refuses_bad_options_before_anything_happens(case):
    make, kind, message = BAD_OPTIONS[case]
    bad = make()
    model = getattr(bad, "model", None)
    before = copy.deepcopy(getattr(bad, "context", None)) if case not in ("deep_message",) else None
    with pytest.raises(kind) as raised:
        await run_agent_loop(bad)
    assert type(raised.value) is kind and str(raised.value) == message
    assert getattr(model, "request_count", 0) == 0  # nothing happened
    if before is not None:
        assert bad.context == before


@pytest.mark.asyncio
async def test_an_exception_that_refuses_attributes_still_reaches_the_caller():
    class Sealed(Exception):
        def __setattr__(self, name, value):
            raise AttributeError(f"{type(self).__name__} takes no attributes")

    def observer(event):
        if event["type"] == "assistant_message":
            raise Sealed("the observer failed")

    with pytest.raises(Sealed, match="the observer failed"):
        await run_agent_loop(options(on_event=observer))


# --- the checker and the renderer never raise ---------------------------------------------------

def deep_run():
    deep_dict = {"a": 1}
    for _ in range(10_000):
        deep_dict = {"a": deep_dict}
    call = tool_call("c", "read", {"x": deep_dict})
    messages = [user_message("hi" + SURROGATE), assistant_message([call], DEEP),
                tool_result(call, [text(SURROGATE)], details=DEEP), DEEP, None, {"role": DEEP}]
    events = [{"type": DEEP}, DEEP, {}, {"type": "model_event", "event": {"type": "text_delta", "delta": SURROGATE}},
              {"type": "turn_end", "reason": DEEP, "steps": DEEP}]
    return messages, events


@pytest.mark.parametrize("kwargs", [
    lambda m, e: dict(input_messages=m[:1], messages=m[:3], events=e, requests=[DEEP, {"messages": DEEP}], reason=DEEP,
                      steps=DEEP, caller_messages_after=DEEP, system_prompt="s", definitions=DEEP, max_steps=DEEP),
    lambda m, e: dict(input_messages=DEEP, messages=DEEP, events=DEEP, requests=DEEP, reason=DEEP, steps=DEEP),
    lambda m, e: dict(input_messages=None, messages=None, events=None, requests=None, reason=None, steps=None),
    lambda m, e: dict(input_messages=[], messages=m, events=e, requests=None, reason="stop", steps=1),
], ids=["deep_everywhere", "deep_lists", "nothing", "garbage_items"])
def test_check_run_reports_and_never_raises(kwargs):
    messages, events = deep_run()
    problems = check_run(**kwargs(messages, events))
    assert problems and all(isinstance(p, str) for p in problems)
    "\n".join(problems).encode("utf-8")


def test_check_run_names_the_deep_and_the_unencodable_messages():
    messages, events = deep_run()
    problems = check_run(input_messages=[], messages=messages[:3], events=[], requests=None, reason="stop", steps=1)
    assert "message 1 is not JSON: it holds \\ud800, a lone surrogate, which is not UTF-8 text" in problems
    assert f"message 2 is not JSON: it is nested deeper than {MAX_DEPTH} levels" in problems


def test_render_run_shows_anything_and_never_raises():
    messages, events = deep_run()
    rendered = render_run(events=events, messages=messages, requests=[DEEP, {}], observations={})
    rendered.encode("utf-8")  # a lone surrogate shows as its escape
    assert "1  user        hi\\ud800" in rendered
    assert "4  model_event(text_delta \"\\ud800\")" in rendered
    assert "5  ? None" in rendered and "## messages\n(not JSON: RecursionError" in rendered


def test_a_call_with_invalid_arguments_renders_what_the_model_wrote():
    call = {**tool_call("c", "read", {}), "argumentsError": "Expecting value at character 10",
            "argumentsText": '{"path": READ'}
    rendered = render_run(events=[], messages=[assistant_message([call], "toolUse", timestamp=1)], requests=None,
                          observations={"steps": 1})
    assert '1  assistant   [toolUse] read(c, invalid JSON "{\\"path\\": READ")' in rendered


def test_the_demo_loop_keeps_running_after_a_caller_error():
    """A refused call leaves nothing behind: the same options, fixed, run normally."""
    fixed = options()
    with pytest.raises(TypeError):
        asyncio.run(run_agent_loop(options(context={"systemPrompt": "s", "messages": "hi"})))
    result = asyncio.run(run_agent_loop(fixed))
    assert result.reason == "stop"


def test_course_prints_a_lone_surrogate_as_its_escape_instead_of_crashing(monkeypatch, tmp_path):
    """A plan or a student's output may hold a lone surrogate; the command prints it escaped, never raises."""
    import io

    from course.judge import cli

    strict = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    monkeypatch.setattr("sys.stdout", strict)
    assert cli.main(["start", "07", "--dir", str(tmp_path)]) == 0
    print("plan: \ud800")  # what a failing plan's description may hold
    strict.flush()
    assert strict.buffer.getvalue().decode("utf-8").endswith("plan: \\ud800\n")


@pytest.mark.parametrize("command", [["check", "07"], ["status"], ["hint", "07"]])
def test_impl_that_is_a_file_or_missing_is_refused_saying_what_it_takes(command, tmp_path, capsys):
    from course.judge import cli

    module = tmp_path / "ch07_agent_loop.py"
    module.write_text("", encoding="utf-8")
    for given, said in ((module, "is a file: --impl takes the directory"), (tmp_path / "nowhere", "is not a directory")):
        with pytest.raises(SystemExit) as stopped:
            cli.main([*command, "--impl", str(given)])
        assert stopped.value.code == 2
        assert said in capsys.readouterr().err
