"""Chapter 06's known mistakes: each patches one essential line of chapters/ch06_tool_execution/ch06_tool_execution.py.

A mistake only against what the project adds beyond the chapter (a tool's output that is no ToolOutput:
malformed, or not JSON) is `track=HARDENING`: the hardening track must fail it and the chapter track must not."""

from course.judge.mutants import Mutant
from course.manifest import HARDENING

OUTPUT_CHECK = 'problem = output_problem(call, output)'
"""The reference's opt-in (加固) to the runtime's check of a tool's output."""

MUTANTS = [
    Mutant("unknown-tool-not-reported", "工具执行",
           "a call to a tool the registry lacks must become an error result (\"Tool NAME not found\"), not a crash",
           'return error_result(call, f"Tool {call[\'name\']} not found")',
           'pass'),
    Mutant("arguments-not-validated", "工具执行",
           "validate the call's arguments against the tool's JSON Schema before running the tool",
           'error = best_match(tool.validator.iter_errors(call["arguments"]))',
           'error = None'),
    Mutant("validation-error-dumps-schema", "工具执行",
           "an invalid-arguments result names the tool and the failing path in one line, not jsonschema's "
           "whole report",
           '{where}: {error.message}',
           '{where}: {error}'),
    Mutant("exception-escapes", "工具执行",
           "a tool that raises must become an error result with the exception's message; nothing escapes",
           'return error_result(call, str(exc) or type(exc).__name__)',
           'raise'),
    Mutant("traceback-in-result", "工具执行",
           "a raising tool's error result keeps the exception's message, never its traceback",
           'return error_result(call, str(exc) or type(exc).__name__)',
           'return error_result(call, __import__("traceback").format_exc())'),
    Mutant("empty-exception-message", "工具执行",
           "an exception without a message is reported by its type name, never as an empty text",
           'str(exc) or type(exc).__name__',
           'str(exc)'),
    Mutant("cancellation-swallowed", "工具执行",
           "a CancelledError raised in the tool became an error result instead of propagating: if you catch "
           "BaseException, catch Exception instead (cancellation is no Exception)",
           'except Exception as exc:',
           'except BaseException as exc:'),
    Mutant("garbage-output-trusted", "工具执行",
           "check that the tool returned a dict with a content list; anything else is an error result",
           OUTPUT_CHECK,
           'problem = output_problem(call, output) if output is None else None  # anything but None is an output',
           track=HARDENING),
    Mutant("is-error-dropped", "工具执行",
           "keep the tool's own isError: a tool may report failure without raising",
           'is_error=bool(output.get("isError", False)),',
           'is_error=False,'),
    Mutant("details-dropped", "工具执行",
           "keep the tool's details in the result",
           'details=output.get("details"),',
           'details=None,'),
    Mutant("result-answers-another-id", "工具执行",
           "the result's toolCallId is the call's id (and its toolName the call's name)",
           'return tool_result(\n        call,',
           'return tool_result(\n    {**call, "id": call["name"]},'),
    Mutant("arguments-not-copied", "工具执行",
           "give the tool a deep copy of the arguments: the call also lives in the transcript",
           'tool.execute(json_copy(call["arguments"]), context)',
           'tool.execute(call["arguments"], context)'),
    # Mistakes only generated scenarios show: schemas the fixed scenarios never use, tools that
    # return or raise what they never do, cancellation from outside, and runs of the chapter 07 loop.
    Mutant("only-required-checked", "工具执行",
           "validate the arguments against the whole schema (types, enums, extra properties), not only "
           "the required keys",
           'error = best_match(tool.validator.iter_errors(call["arguments"]))',
           'error = best_match(e for e in tool.validator.iter_errors(call["arguments"]) if e.validator == "required")'),
    Mutant("nested-values-not-validated", "工具执行",
           "validate nested objects and arrays too: the schema applies at every depth",
           'error = best_match(tool.validator.iter_errors(call["arguments"]))',
           'error = best_match(e for e in tool.validator.iter_errors(call["arguments"]) if len(e.absolute_path) <= 1)'),
    Mutant("extra-properties-allowed", "工具执行",
           "additionalProperties false refuses properties the schema does not name",
           'error = best_match(tool.validator.iter_errors(call["arguments"]))',
           'error = best_match(e for e in tool.validator.iter_errors(call["arguments"]) '
           'if e.validator != "additionalProperties")'),
    Mutant("validator-cached-by-name", "工具执行",
           "validate with the called tool's own schema: another registry may have a tool of the same name",
           'error = best_match(tool.validator.iter_errors(call["arguments"]))',
           'validator = _VALIDATORS.setdefault(call["name"], tool.validator)  # built once per tool name\n'
           'error = best_match(validator.iter_errors(call["arguments"]))',
           also=(("from course.runtime.tools import Registry, ToolExecutionContext, error_result\n",
                  "from course.runtime.tools import Registry, ToolExecutionContext, error_result\n\n_VALIDATORS = {}\n"),)),
    Mutant("path-joined-with-dots", "工具执行",
           "an invalid-arguments result names the failing value's keys and indexes joined by '/' "
           "(\"arguments\" for the arguments themselves)",
           '"/".join(str(part) for part in error.absolute_path)',
           '".".join(str(part) for part in error.absolute_path)'),
    Mutant("tool-name-normalized", "工具执行",
           "look the tool up by the call's name exactly as the model wrote it",
           'tool = registry.get(call["name"])',
           'tool = registry.get(call["name"].strip().lower())'),
    Mutant("aborted-signal-refused", "工具执行",
           "the executor runs the tool whatever the signal says: the tool watches the signal, the loop "
           "decides what starts",
           'tool = registry.get(call["name"])',
           'if context.signal is not None and context.signal.aborted:\n'
           '    return error_result(call, "Tool call was not executed because the run was aborted.")\n'
           'tool = registry.get(call["name"])'),
    Mutant("arguments-shallow-copied", "工具执行",
           "a shallow copy shares nested lists and dicts with the call: give the tool a deep copy",
           'tool.execute(json_copy(call["arguments"]), context)',
           'tool.execute(dict(call["arguments"]), context)'),
    Mutant("progress-not-forwarded", "工具执行",
           "hand the tool the caller's context: its report_progress is how progress reaches the loop",
           'tool.execute(json_copy(call["arguments"]), context)',
           'tool.execute(json_copy(call["arguments"]), ToolExecutionContext(signal=context.signal))'),
    Mutant("signal-not-forwarded", "工具执行",
           "hand the tool the caller's context: its signal is how a long tool learns of an abort",
           'tool.execute(json_copy(call["arguments"]), context)',
           'tool.execute(json_copy(call["arguments"]), ToolExecutionContext(report_progress=context.report_progress))'),
    Mutant("call-kept-in-a-global", "工具执行",
           "keep each execution's call in its own local variables: calls of one batch run at the same time",
           'output = await tool.execute(json_copy(call["arguments"]), context)',
           'global _running_call\n'
           '_running_call = call  # remembered for the result below\n'
           'output = await tool.execute(json_copy(call["arguments"]), context)\n'
           'call = _running_call'),
    Mutant("tool-shielded-from-cancellation", "工具执行",
           "cancelling the execution cancels the running tool too: do not shield it or run it detached",
           'output = await tool.execute(json_copy(call["arguments"]), context)',
           'output = await __import__("asyncio").shield(tool.execute(json_copy(call["arguments"]), context))'),
    Mutant("cancellation-caught", "工具执行",
           "a CancelledError raised in the tool became an error result instead of propagating: if you catch "
           "asyncio.CancelledError, let it go on (it is not the tool failing)",
           'except Exception as exc:',
           'except (Exception, __import__("asyncio").CancelledError) as exc:'),
    Mutant("exception-first-argument", "工具执行",
           "the error text is str(exception), or its type name when that is empty; not its first argument",
           'str(exc) or type(exc).__name__',
           'exc.args[0] if exc.args else type(exc).__name__'),
    Mutant("exception-type-always-named", "工具执行",
           "the error text is the exception's message alone; its type name only when the message is empty",
           'str(exc) or type(exc).__name__',
           'f"{type(exc).__name__}: {exc}"'),
    Mutant("empty-content-refused", "工具执行",
           "an empty content list is a valid output; check the type of content, not its truth",
           OUTPUT_CHECK,
           'if isinstance(output, dict) and not output.get("content"):  # nothing to tell the model\n'
           '    return error_result(call, f"Tool {call[\'name\']} returned {type(output).__name__}, not a dict with a "\n'
           '                              "content list")\n' + OUTPUT_CHECK),
    Mutant("output-not-checked-json", "工具执行",
           "check that the output's content and details are JSON: a transcript is JSON",
           OUTPUT_CHECK,
           'problem = None if isinstance(output, dict) and isinstance(output.get("content"), list) \\\n'
           '    else output_problem(call, output)  # the shape only',
           track=HARDENING),
    Mutant("details-not-checked-json", "工具执行",
           "the details are part of the transcript too: check them for JSON as well as the content",
           OUTPUT_CHECK,
           'problem = output_problem(call, {**output, "details": None} if isinstance(output, dict) else output)',
           track=HARDENING),
    Mutant("error-flag-not-coerced", "工具执行",
           "the result's isError is a bool: the truth of the tool's isError",
           'is_error=bool(output.get("isError", False)),',
           'is_error=output.get("isError", False),'),
    Mutant("error-flag-only-true", "工具执行",
           "the result's isError is the truth of the tool's isError (1 and \"yes\" are true)",
           'is_error=bool(output.get("isError", False)),',
           'is_error=output.get("isError") is True,'),
    Mutant("details-dropped-on-error", "工具执行",
           "keep the tool's details when it reports an error too",
           'details=output.get("details"),',
           'details=None if output.get("isError") else output.get("details"),'),
    Mutant("falsy-details-dropped", "工具执行",
           "keep details that are falsy (0, \"\", [], {}, false): only missing (None) details are left out",
           'details=output.get("details"),',
           'details=output.get("details") or None,'),
    Mutant("output-reported-as-progress", "工具执行",
           "progress is what the tool reports while it runs; the executor reports nothing of its own",
           'return tool_result(\n        call,\n        output["content"],',
           'context.report_progress(output["content"])  # the final output, shown as the last progress\n'
           'return tool_result(\n    call,\n    output["content"],'),
    # Mistakes a red team found passing: each is caught by a pinned plan (course/judge/scenarios), not by luck.
    Mutant("output-cut-short", "工具执行",
           "the tool's content arrives whole, however long: a megabyte of text is not cut",
           'output["content"],\n        is_error=',
           '[{**block, "text": block["text"][:50_000]} if isinstance(block, dict) and isinstance(block.get("text"), str)\n'
           ' else block for block in output["content"]],  # keep the transcript small\nis_error='),
    Mutant("tuple-content-accepted", "工具执行",
           "content must be a list: an output whose content is a tuple (or any other sequence) is malformed, not converted",
           OUTPUT_CHECK,
           'if isinstance(output, dict) and isinstance(output.get("content"), tuple):  # as good as a list\n'
           '    output = {**output, "content": list(output["content"])}\n' + OUTPUT_CHECK,
           track=HARDENING),
    Mutant("numeric-strings-coerced", "工具执行",
           "validate the arguments as the model sent them: \"7\" is not an integer, and coercing it first "
           "(as AJV's coerceTypes does) lets wrong arguments through",
           'error = best_match(tool.validator.iter_errors(call["arguments"]))',
           'arguments = json_copy(call["arguments"])\n'
           'for key, spec in tool.parameters.get("properties", {}).items():  # "7" means 7, like AJV\n'
           '    value = arguments.get(key)\n'
           '    if spec.get("type") in ("integer", "number") and isinstance(value, str) and value.strip().lstrip("-").isdigit():\n'
           '        arguments[key] = int(value)\n'
           'error = best_match(tool.validator.iter_errors(arguments))',
           also=(('tool.execute(json_copy(call["arguments"]), context)', 'tool.execute(arguments, context)'),)),
    Mutant("exception-group-unwrapped", "工具执行",
           "the error text is str(exception) of what the tool raised, an ExceptionGroup too: not its first "
           "sub-exception's",
           'return error_result(call, str(exc) or type(exc).__name__)',
           'while isinstance(exc, BaseExceptionGroup):  # the first failure says what went wrong\n'
           '    exc = exc.exceptions[0]\n'
           'return error_result(call, str(exc) or type(exc).__name__)'),
    Mutant("exception-cause-appended", "工具执行",
           "the error text is str(exception) alone: nothing of its __cause__ or __context__ is added",
           'return error_result(call, str(exc) or type(exc).__name__)',
           'cause = exc.__cause__ or exc.__context__\n'
           'said = str(exc) or type(exc).__name__\n'
           'return error_result(call, said + (f" (caused by {type(cause).__name__}: {cause})" if cause else ""))'),
    Mutant("exception-notes-appended", "工具执行",
           "the error text is str(exception) alone: its __notes__ are not part of it",
           'return error_result(call, str(exc) or type(exc).__name__)',
           'return error_result(call, "\\n".join([str(exc) or type(exc).__name__, *getattr(exc, "__notes__", [])]))'),
    Mutant("exception-message-cut", "工具执行",
           "the error text is the whole str(exception), however long",
           'return error_result(call, str(exc) or type(exc).__name__)',
           'return error_result(call, (str(exc) or type(exc).__name__)[:500])'),
    Mutant("output-checked-whole", "工具执行",
           "check only what reaches the transcript (content and details) for JSON: other keys of the output "
           "may hold anything",
           OUTPUT_CHECK,
           'try:\n'
           '    json.dumps(output, allow_nan=False)  # the whole output must be JSON\n'
           'except (TypeError, ValueError) as error:\n'
           '    return error_result(call, f"Tool {call[\'name\']} returned output that is not JSON: {error}")\n'
           + OUTPUT_CHECK,
           also=(("from __future__ import annotations\n", "from __future__ import annotations\n\nimport json\n"),)),
]
