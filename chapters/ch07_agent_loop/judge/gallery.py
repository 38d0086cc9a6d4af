"""Chapter 07's known mistakes: each patches one essential line of chapters/ch07_agent_loop/ch07_agent_loop.py.

A mistake only against what the project adds beyond the chapter (a raising model or observer, an injected
executor's malformed answers, cancellation, late progress, an empty exception message) is `track=HARDENING`:
the hardening track must fail it and the chapter track must not."""

from course.judge.mutants import Loop, Mutant
from course.manifest import HARDENING

GATHER = 'return await asyncio.gather(*(execute_one(call, execute, signal, emit) for call in calls))'
WATCH = 'execute = guard.watch(execute)  # 加固: no progress after a call ended; an observer failing there is raised'

MUTANTS = [
    # 纯文本 stop / 第一次 model.stream() 追加 assistant 消息
    Mutant("assistant-appended-twice", "纯文本 stop",
           "your loop appends the assistant message twice; each model answer enters the transcript once",
           'messages.append(assistant)',
           'messages.append(assistant)\nmessages.append(assistant)'),
    Mutant("deltas-appended-as-messages", "纯文本 stop",
           "your loop puts model events (deltas) into the transcript; they are only emitted as model_event, "
           "the transcript gets the final assistant message",
           'emit({"type": "model_event", "event": event})',
           'emit({"type": "model_event", "event": event})\nmessages.append(event)'),
    Mutant("assistant-message-event-missing", "纯文本 stop",
           "your loop never emits assistant_message after appending the model's answer",
           'emit({"type": "assistant_message", "message": assistant})',
           'pass'),
    Mutant("turn-end-missing", "纯文本 stop",
           "your loop ends without emitting turn_end; every run ends with exactly one turn_end",
           'emit({"type": "turn_end", "reason": reason, "steps": steps})',
           'pass'),
    Mutant("turn-end-twice", "纯文本 stop",
           "your loop emits turn_end twice; it is the run's single last event",
           'emit({"type": "turn_end", "reason": reason, "steps": steps})',
           'emit({"type": "turn_end", "reason": reason, "steps": steps})\n'
           'emit({"type": "turn_end", "reason": reason, "steps": steps})'),

    # 单工具往返 / call-1 的结果进入第二次模型请求
    Mutant("caller-messages-mutated", "单工具往返",
           "your loop appends to the caller's context[\"messages\"]; work on a deep copy of it",
           'copy.deepcopy(options.context["messages"])',
           'options.context["messages"]'),
    Mutant("request-sends-caller-messages", "单工具往返",
           "each model request must carry this run's messages (the assistant and tool results so far), "
           "not the caller's original list",
           '"messages": messages,',
           '"messages": options.context["messages"],'),
    Mutant("context-tools-forwarded", "单工具往返",
           "your request forwards context[\"tools\"]; the model is offered the registry's definitions",
           '"tools": options.tools.definitions(),',
           '"tools": options.context.get("tools") or options.tools.definitions(),'),
    Mutant("progress-without-call-id", "单工具往返",
           "your tool_progress events lack the call's id (callId), so a UI cannot place them",
           '"callId": call["id"], ',
           ''),

    # 非执行终态 / length：工具不启动，调用仍然闭合
    Mutant("length-executes-tools", "非执行终态",
           "your loop runs tools after a truncated response (stopReason length)",
           'if assistant["stopReason"] != "toolUse":',
           'if assistant["stopReason"] not in ("toolUse", "length"):'),
    Mutant("error-executes-tools", "非执行终态",
           "your loop runs tools from a response that ended with an error",
           'if assistant["stopReason"] != "toolUse":',
           'if assistant["stopReason"] not in ("toolUse", "error"):'),
    Mutant("aborted-executes-tools", "非执行终态",
           "your loop runs tools from an aborted response",
           'if assistant["stopReason"] != "toolUse":',
           'if assistant["stopReason"] not in ("toolUse", "aborted"):'),
    Mutant("stop-with-calls-ignores-them", "非执行终态",
           "a stop that still carries tool calls must answer each call with a skipped result and end error",
           'if assistant["stopReason"] == "stop" and not calls:',
           'if assistant["stopReason"] == "stop":'),
    Mutant("stop-with-calls-ends-stop", "非执行终态",
           "a stop that carries tool calls ends the run with reason error, not stop",
           'ended without requesting tool use.", "error"),',
           'ended without requesting tool use.", "stop"),'),
    Mutant("tool-use-without-calls-requests-again", "非执行终态",
           "a toolUse answer without any tool call is not a batch to continue with: end the run with error "
           "instead of requesting the model again",
           'if assistant["stopReason"] == "toolUse" and not calls:',
           'if assistant["stopReason"] == "toolUse" and calls is None:'),
    Mutant("skipped-without-event", "非执行终态",
           "your loop appends skipped results without emitting tool_skipped for each",
           'emit({"type": "tool_skipped", "result": skipped})',
           'pass'),
    Mutant("skipped-answers-first-call", "非执行终态",
           "every skipped result must carry the toolCallId of its own call, not the first call's",
           'error_result(call, why,',
           'error_result(calls[0], why,'),

    # 并发工具 / 多个工具同时运行，结果仍按工具调用顺序追加
    Mutant("results-in-completion-order", "并发工具",
           "your loop appends tool results in the order the tools finished; append them in call order",
           GATHER,
           GATHER.replace("return await", "results = await") + '\n'
           'return sorted(results, key=lambda result: result["timestamp"])'),
    Mutant("tools-one-after-another", "并发工具",
           "your loop awaits each tool before starting the next; a batch runs concurrently",
           GATHER,
           'return [await execute_one(call, execute, signal, emit) for call in calls]'),
    Mutant("rejection-fails-the-batch", "并发工具",
           "an executor that raises must become an error result for its own call; the rest of the batch goes on",
           'result = error_result(call, str(exc) or type(exc).__name__)',
           'raise'),
    Mutant("traceback-in-result", "并发工具",
           "a rejected executor's error result keeps the exception's message, never its traceback",
           'result = error_result(call, str(exc) or type(exc).__name__)',
           'result = error_result(call, __import__("traceback").format_exc())'),

    # 取消与上限 / 取消与 maxSteps 阻止新的模型请求
    Mutant("abort-at-head-counts-the-request", "取消与上限",
           "an abort noticed at the loop head returns steps - 1: that request never started",
           'return finish("aborted", steps - 1)',
           'return finish("aborted", steps)'),
    Mutant("no-abort-check-after-batch", "取消与上限",
           "check the signal after the tool batch too, so an abort during the last allowed step ends aborted",
           'return finish("aborted", steps)',
           'pass'),
    Mutant("abort-check-leaves-calls-open", "取消与上限",
           "an abort must not leave the answer's tool calls without results: pair them (skipped) before ending",
           'calls = tool_calls(assistant)',
           'calls = tool_calls(assistant)\n'
           'if is_aborted(options.signal):\n'
           '    return finish("aborted", steps)'),
    Mutant("signal-not-given-to-model", "取消与上限",
           "hand the run's signal to model.stream() so an abort stops the answer being streamed",
           'options.model.stream(request, signal=options.signal)',
           'options.model.stream(request)'),
    Mutant("signal-not-given-to-tools", "取消与上限",
           "hand the run's signal to every tool (its execution context), so a long tool can stop",
           'ToolExecutionContext(signal=signal, report_progress=report_progress)',
           'ToolExecutionContext(report_progress=report_progress)'),
    Mutant("max-steps-one-short", "取消与上限",
           "max_steps is how many model requests the run may make; your loop makes one fewer",
           'range(1, options.max_steps + 1)',
           'range(1, options.max_steps)'),
    Mutant("max-steps-one-over", "取消与上限",
           "max_steps is how many model requests the run may make; your loop makes one more",
           'range(1, options.max_steps + 1)',
           'range(1, options.max_steps + 2)'),
    # Generated scenarios (issue 13): collaborators' freedoms, batch sizes, orders, observers, cancellation
    Mutant("results-in-completion-order-from-three", "并发工具",
           "with three or more calls your loop appends results in the order the tools finished; "
           "every batch appends them in call order",
           GATHER,
           'ended = []\n'
           'async def ending(call):\n'
           '    ended.append(await execute_one(call, execute, signal, emit))\n'
           '    return ended[-1]\n'
           'results = await asyncio.gather(*(ending(call) for call in calls))\n'
           'return ended if len(calls) >= 3 else results'),
    Mutant("tool-start-inside-each-task", "并发工具",
           "emit every call's tool_start before any tool of the batch runs, not as each tool starts",
           'for call in calls:\n        emit({"type": "tool_start", "call": call})',
           'pass',
           also=(('def report_progress(content: list[TextContent]) -> None:',
                  'emit({"type": "tool_start", "call": call})\ndef report_progress(content: list[TextContent]) -> None:'),)),
    Mutant("batch-not-cancelled-on-failure", "并发工具",
           "when the batch is cut short (an observer raised, the run was cancelled), cancel and await the "
           "tools still running: none may be left running after the run",
           'async with guard:',
           'guard._cancel_running = lambda: asyncio.sleep(0)  # the tools still running are left to run\n'
           'async with guard:',
           track=HARDENING),
    Mutant("observer-required", "纯文本 stop",
           "on_event is optional: a run without an observer emits to no one, it does not fail",
           'if options.on_event is not None:',
           'if True:'),
    Mutant("observer-errors-swallowed", "纯文本 stop",
           "an exception raised by the on_event observer must reach the caller, not be ignored",
           '            options.on_event(event)',
           '            try:\n'
           '                options.on_event(event)\n'
           '            except Exception:\n'
           '                pass',
           track=HARDENING),
    Mutant("assistant-event-before-append", "纯文本 stop",
           "append the assistant message to the transcript before emitting assistant_message: an observer "
           "that raises there must find it in exc.transcript",
           'messages.append(assistant)\n            emit({"type": "assistant_message", "message": assistant})',
           'emit({"type": "assistant_message", "message": assistant})\nmessages.append(assistant)',
           track=HARDENING),
    Mutant("skipped-event-before-append", "非执行终态",
           "append each skipped result before emitting its tool_skipped: an observer that raises there must "
           "find it in exc.transcript",
           'messages.append(skipped)\n                    emit({"type": "tool_skipped", "result": skipped})',
           'emit({"type": "tool_skipped", "result": skipped})\nmessages.append(skipped)',
           track=HARDENING),
    Mutant("model-event-wrapper-reused", "纯文本 stop",
           "emit a new event for every model event: an observer may keep the events it was handed",
           'async for event in stream:\n        emit({"type": "model_event", "event": event})',
           'wrapper = {"type": "model_event"}\n'
           'async for event in stream:\n'
           '    wrapper["event"] = event\n'
           '    emit(wrapper)'),
    Mutant("caller-messages-copied-shallowly", "单工具往返",
           "copy the caller's messages deeply: with a shallow copy, a caller changing its own message dicts "
           "changes your transcript and requests",
           'copy.deepcopy(options.context["messages"])',
           'list(options.context["messages"])'),
    Mutant("stale-tools-when-registry-empty", "单工具往返",
           "the model is offered the registry's definitions, even none: never context[\"tools\"]",
           '"tools": options.tools.definitions(),',
           '"tools": options.tools.definitions() or options.context.get("tools", []),'),
    Mutant("system-prompt-only-first", "单工具往返",
           "every model request carries the context's system prompt, not only the first",
           '"systemPrompt": options.context["systemPrompt"],',
           '"systemPrompt": options.context["systemPrompt"] if len(messages) == len(options.context["messages"]) else "",'),
    Mutant("late-progress-emitted", "单工具往返",
           "progress a tool reports after its call ended (it returned, raised or was cancelled) belongs to no "
           "running tool: do not emit it",
           WATCH,
           'pass  # progress is forwarded whenever the tool reports it',
           track=HARDENING),
    Mutant("executor-answer-trusted", "单工具往返",
           "an injected executor's answer that is not a result for its call (another id or tool, not a dict, "
           "not JSON) becomes an error result for the right call",
           'checked(options.execute_tool_call) if options.execute_tool_call is not None else',
           'options.execute_tool_call if options.execute_tool_call is not None else',
           track=HARDENING),
    Mutant("empty-exception-message", "并发工具",
           "an executor raising an exception without a message becomes an error result naming its type",
           'result = error_result(call, str(exc) or type(exc).__name__)',
           'result = error_result(call, str(exc))',
           track=HARDENING),
    Mutant("observer-error-in-progress-becomes-result", "单工具往返",
           "an observer raising at tool_progress must reach the caller, not become the tool's error result",
           "except Exception as exc:  # one failing executor must not lose its siblings' results",
           "except (Exception, _ObserverFailed) as exc:  # the observer's failure taken for the tool's\n"
           "    exc = getattr(exc, 'error', exc)",
           also=(('from course.runtime.hardening import RunGuard, checked',
                  'from course.runtime.hardening import RunGuard, _ObserverFailed, checked'),),
           track=HARDENING),
    Mutant("no-calls-ends-stop", "非执行终态",
           "an answer without calls ends with the reason its stopReason calls for (length, error, aborted), "
           "not always stop",
           'if assistant["stopReason"] == "stop" and not calls:',
           'if assistant["stopReason"] != "toolUse" and not calls:'),
    Mutant("skipped-text-of-length-for-stop", "非执行终态",
           "a stop that carries calls skips them saying the response ended without requesting tool use",
           '"stop": ("Tool call was not executed because the model response ended without requesting tool use.", "error"),',
           '"stop": ("Tool call was not executed because the model response was truncated.", "error"),'),
    Mutant("exc-transcript-without-finished-results", "取消与上限",
           "exc.transcript keeps the results of the batch's tools that had finished when the run was cut short",
           "guard.note(event)  # 加固: the batch's finished results, for exc.transcript",
           'pass',
           track=HARDENING),
    Mutant("cancellation-swallowed", "取消与上限",
           "cancelling the task running the loop must raise CancelledError to the caller, not end the run aborted",
           'messages.extend(await run_tool_batch(calls, execute, options.signal, emit))',
           'try:\n'
           '    messages.extend(await run_tool_batch(calls, execute, options.signal, emit))\n'
           'except asyncio.CancelledError:\n'
           '    return finish("aborted", steps)',
           track=HARDENING),
    Mutant("single-call-cancellation-swallowed", "取消与上限",
           "a tool that ignores the cancellation must not keep the run going: the CancelledError still ends it",
           GATHER,
           "if len(calls) == 1:  # nothing runs beside it: awaited in the loop's own task\n"
           '    return [await execute_one(calls[0], execute, signal, emit)]\n' + GATHER,
           track=HARDENING),
    # Found by a red team: each passed `course check 07` until the scenario that now catches it was added.
    Mutant("exception-first-argument", "并发工具",
           "an executor's exception becomes an error result with str(exc) (or the type's name when that is "
           "empty), not its first argument",
           'result = error_result(call, str(exc) or type(exc).__name__)',
           'result = error_result(call, str(exc.args[0]) if exc.args else type(exc).__name__)'),
    Mutant("exception-named-only-without-args", "并发工具",
           "an exception whose message is empty (RuntimeError(\"\")) is named by its type too, not only one "
           "without arguments",
           'result = error_result(call, str(exc) or type(exc).__name__)',
           'result = error_result(call, str(exc) if exc.args else type(exc).__name__)',
           track=HARDENING),
    Mutant("progress-blocks-merged", "单工具往返",
           "tool_progress carries the content the tool reported as it is: every block, not one merged text",
           'emit({"type": "tool_progress", "callId": call["id"], "content": content})',
           'emit({"type": "tool_progress", "callId": call["id"], "content": [{"type": "text", "text": "".join('
           'block["text"] for block in content)}][: len(content)]})'),
    Mutant("result-details-not-checked", "单工具往返",
           "an injected executor's answer must be JSON as a whole (its details too) before the transcript "
           "keeps it",
           'checked(options.execute_tool_call) if options.execute_tool_call is not None else',
           'checked_but_details(options.execute_tool_call) if options.execute_tool_call is not None else',
           also=(('def is_aborted(',
                  'def checked_but_details(execute):\n'
                  '    from course.runtime.hardening import result_problem\n\n'
                  '    async def execute_checked(call, context):\n'
                  '        result = await execute(call, context)\n'
                  '        seen = {k: v for k, v in result.items() if k != "details"} if isinstance(result, dict) else result\n'
                  '        problem = result_problem(call, seen)\n'
                  '        return result if problem is None else error_result(call, problem)\n'
                  '    return execute_checked\n\n\n'
                  'def is_aborted('),),
           track=HARDENING),
    Mutant("observer-error-awaits-siblings", "并发工具",
           "when an observer raises, cancel the tools still running: waiting for them can take for ever",
           GATHER,
           'results = await asyncio.gather(*(execute_one(call, execute, signal, emit) for call in calls), '
           'return_exceptions=True)\n'
           'for result in results:\n'
           '    if isinstance(result, BaseException):\n'
           '        raise result\n'
           'return results',
           track=HARDENING),
    Mutant("running-calls-in-a-global", "并发工具",
           "whether a call still runs is the run's own state: two runs at once (or one after another) may "
           "name their calls alike",
           'emit({"type": "tool_progress", "callId": call["id"], "content": content})',
           'if call["id"] not in ENDED_CALLS:  # progress reported after the call ended belongs to no tool item\n'
           '    emit({"type": "tool_progress", "callId": call["id"], "content": content})',
           also=((WATCH, 'pass  # the calls that ended are kept in ENDED_CALLS instead'),
                 ('emit({"type": "tool_end", "result": result})',
                  'ENDED_CALLS.add(call["id"])\nemit({"type": "tool_end", "result": result})'),
                 ('def is_aborted(', 'ENDED_CALLS: set[str] = set()\n\n\ndef is_aborted('))),
    Mutant("options-context-rebound", "单工具往返",
           "the loop never assigns to its options: a caller may run the same options again",
           'messages: list[Message] = copy.deepcopy(options.context["messages"])',
           'messages: list[Message] = copy.deepcopy(options.context["messages"])\n'
           'options.context = {**options.context, "messages": messages}'),
    Mutant("skipped-details-shared", "非执行终态",
           "each skipped result has details of its own: one dict shared by them all changes with any of them",
           'skipped = error_result(call, why, details={"skipped": True, "reason": assistant["stopReason"]})',
           'skipped = error_result(call, why, details=SKIPPED_DETAILS.setdefault(assistant["stopReason"], '
           '{"skipped": True, "reason": assistant["stopReason"]}))',
           also=(('def is_aborted(', 'SKIPPED_DETAILS: dict = {}\n\n\ndef is_aborted('),)),
    Mutant("request-spreads-context", "单工具往返",
           "a request holds the system prompt, this run's messages and the registry's definitions: nothing "
           "else of the caller's context",
           '"systemPrompt": options.context["systemPrompt"],',
           '**options.context,'),
    Mutant("model-garbage-crashes-the-loop", "纯文本 stop",
           "a model whose stream yields something that is not an event, or whose result is not a message, "
           "becomes an error answer (guard_stream), never a crash of the loop",
           'stream = guard_stream(lambda: options.model.stream(request, signal=options.signal))',
           'stream = options.model.stream(request, signal=options.signal)',
           track=HARDENING),
]

# Loops written from the chapter text on their own, each with one mistake (whole modules, not patches of the
# reference: `chapters/ch07_agent_loop/judge/loops/`), in styles the reference does not use.
LOOPS = [
    Loop("progress-id-of-the-last-call", "单工具往返",
         "each call's progress callback must carry that call's own id: a lambda made in a for loop reads the "
         "loop variable when it is called, so every call reports under the batch's last id (bind it: a function "
         "per call, or a default argument)",
         "ch07_progress_id_of_the_last_call.py"),
    Loop("tool-end-once-the-batch-ended", "并发工具",
         "emit each tool_end as its tool finishes (the order the tools finish in); only the results go into the "
         "transcript in call order, once the whole batch has ended",
         "ch07_tool_end_once_the_batch_ended.py"),
    Loop("abort-checked-before-the-batch", "取消与上限",
         "the loop checks the signal at two points only, before each model request and after each batch: an "
         "abort once a toolUse answer is complete still lets its batch run, then ends the run aborted",
         "ch07_abort_checked_before_the_batch.py"),
    Loop("only-length-pairs-its-calls", "非执行终态",
         "error, aborted and a stop that carries calls pair their calls as length does: a skipped error result "
         "and a tool_skipped event for each, then the run ends",
         "ch07_only_length_pairs_its_calls.py"),
]
