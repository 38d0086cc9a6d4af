"""Chapter 07's generated plans: what each section draws, in two tracks.

The chapter track (sections `pure_stop`, `round_trip`, `terminals`, `concurrent`, `abort`) draws only
inputs inside the chapter's contract: models follow the stream contract, executors return a result for
their own call or reject, observers return, nobody cancels the run, no tool reports progress after it
returned, and the signal is aborted only where the chapter names it (before the start, while a batch
runs). Within those bounds it varies texts, tool counts, completion orders, abort points and
`max_steps`, and each section's plans exercise that section (a `纯文本 stop` plan is a pure stop). Each
plan carries its `kind`, and each kind the sentences of the chapter it holds the loop to (`KINDS`).

The hardening track (sections `hardening_*`, named 加固) draws what it drew before the tracks were
split, every freedom of the loop's collaborators (`any_plans`, from the same seeds): a model that
raises or breaks its stream, an injected executor's malformed answers, an observer that raises, the
caller's cancellation, progress after a tool returned, aborts anywhere. `beyond_the_chapter(plan)`
names the hardening promises a plan leans on.

A plan is a `Plan`, its answers `Step`s, their calls `Call`s (`chapters.ch07_agent_loop.scenarios`).
Every choice a builder makes is a Hypothesis draw (`course.judge.drawing.Draw`), so a failing plan shrinks:
each list of options starts with the simplest (no text, no observer hook, the first tool behaviour, calls
finishing in call order), and counts shrink to their lowest (fewest answers, fewest calls).
"""

from __future__ import annotations

from dataclasses import dataclass

from chapters.ch07_agent_loop.scenarios import MODEL_FAILURES as FAILING_MODELS, Cancel, Plan, Step
from course.judge.drawing import Draw, plans

RUNNING = ["succeed", "succeed", "succeed", "succeed", "raise", "raise_empty", "report_error", "not_json", "garbage"]
INJECTED_ONLY = ["wrong_call", "wrong_tool", "wrong_role", "no_content", "error_not_bool"]
REFUSED = ["bad_arguments", "unknown_tool"]
HOLDING = ["hold", "ignore_cancel"]
HOOKED = ["tool_end", "tool_start", "assistant_message", "tool_progress", "model_event", "tool_skipped", "turn_end"]
"""The events an observer's hook may fire at (the n-th of a type): where a loop's order and bookkeeping show."""
FOCUS = {
    "pure_stop": ["assistant_message", "turn_end", "model_event"],
    "round_trip": ["tool_start", "tool_progress", "tool_end", "assistant_message"],
    # assistant_message twice: an abort once the terminal answer is complete must not change how the run ends
    "terminals": ["tool_skipped", "tool_skipped", "assistant_message", "assistant_message", "turn_end"],
    "concurrent": ["tool_end", "tool_progress", "tool_start"],
    # assistant_message twice: an abort between a toolUse answer and its batch must still run the batch
    "abort": ["tool_end", "tool_progress", "model_event", "assistant_message", "assistant_message", "tool_start"],
}
"""The events a section's hooks fire at more often than the others: where its mistakes show."""
TERMINAL = ["stop", "length", "error", "aborted", *FAILING_MODELS, "toolUse"]

CHAPTER_SECTIONS = ("pure_stop", "round_trip", "terminals", "concurrent", "abort")
HARDENING_SECTIONS = {f"hardening_{section}": section for section in CHAPTER_SECTIONS}
"""Each hardening section and the section whose plans it drew before the tracks were split."""
EXAMPLES = {"pure_stop": 20, "round_trip": 30, "terminals": 30, "concurrent": 30, "abort": 40,
            "hardening_pure_stop": 25, "hardening_round_trip": 30, "hardening_terminals": 30,
            "hardening_concurrent": 30, "hardening_abort": 40}
SEED_KEYS = dict(HARDENING_SECTIONS)
"""A hardening section draws from the seed its plans had before the split: the same plans as then."""


def _runs(executor: str, registry: bool, does: str) -> bool:
    return executor == "injected" or (registry and does not in REFUSED)


PROGRESS = [(0, False), (1, False), (2, False), (0, True), (1, True)]
"""(progress reports while it runs, whether it reports again after it returned), by drawn code; the report
as it starts is drawn per step."""
CHAPTER_PROGRESS = [(0, False), (1, False), (2, False)]
"""The chapter track's: a tool reports progress only while its call runs."""


def step_plans(draw: Draw, number: int, world: dict, *, reason: str, calls: tuple[int, int],
               extra: tuple[str, ...] = (), holders: bool = False, choices: list[str] | None = None,
               progress: list[tuple[int, bool]] = PROGRESS) -> Step:
    """One scripted answer with its calls: what each call's tool does, its progress, the finish order.
    `choices` (what a call's tool may do) defaults to everything the executor can meet."""
    if choices is None:
        choices = RUNNING + (INJECTED_ONLY if world["executor"] == "injected" else REFUSED)
    choices = choices + list(extra)
    count = draw.integers(*calls)
    # One call of the step may report progress as it starts (only one: which call's tool starts first is free).
    before_at = draw.integers(0, 2 * count) - 1 if count else -1
    text = draw.booleans()
    planned = []
    for i in range(count):
        does = draw.sampled_from(choices)
        during, late = draw.sampled_from(progress)
        planned.append({"id": f"s{number}c{i}", "does": does, "before": int(i == before_at),
                        "during": during, "late": late})
    if holders and planned:  # a cancellation during this batch: some of its calls run until cancelled
        first = draw.integers(0, count - 1)
        planned[first]["does"] = draw.sampled_from(HOLDING)
        if count > 1 and draw.booleans():
            planned[(first + 1) % count]["does"] = "ignore_cancel"
    running = [c["id"] for c in planned
               if _runs(world["executor"], world["registry"], c["does"]) and c["does"] not in HOLDING + ["watch"]]
    return {"stopReason": reason, "text": text, "calls": planned,
            "finishOrder": draw.permutations(running)}


def hold_last(step: Step) -> None:
    """The step's last call to finish runs on instead, until it is cancelled (or for a while, then answers)."""
    last = step["finishOrder"].pop()
    next(c for c in step["calls"] if c["id"] == last)["does"] = "hold"


def abort_first(step: Step, *, holding_sibling: bool) -> None:
    """The step's first call to finish aborts the run; with `holding_sibling`, its last one runs on until it is
    cancelled (or for a while, then answers anyway): an abort is no reason to cut a running tool short."""
    order = step["finishOrder"]
    if holding_sibling and len(order) >= 2:
        hold_last(step)
    if order:
        next(c for c in step["calls"] if c["id"] == order[0])["does"] = "abort"


def _world(draw: Draw, *, through_the_registry: bool = False) -> dict:
    """The caller's side of a plan: its messages, a stale context["tools"], the registry, the executor
    (`through_the_registry`: the probe tool registered, the chapter 06 executor)."""
    world = {"input": draw.sampled_from(["one", "one", "history"]), "staleTools": draw.booleans()}
    if through_the_registry:
        return {**world, "registry": True, "executor": "chapter06"}
    return {**world, "registry": draw.sampled_from([True, True, True, False]),
            "executor": draw.sampled_from(["chapter06", "injected"])}


# --- the hardening track: every freedom of the loop's collaborators ------------------------------------

def _any_steps(draw: Draw, section: str, world: dict) -> tuple[list[Step], Cancel | None]:
    """The answers of a hardening plan that leans towards `section`, and the caller's cancellation, if any."""
    steps: list[Step] = []
    cancel = None
    if section == "pure_stop":
        for _ in range(draw.sampled_from([0, 0, 0, 1])):
            steps.append(step_plans(draw, len(steps) + 1, world, reason="toolUse", calls=(1, 2)))
        reason = draw.sampled_from(["stop"] * 6 + ["error", *FAILING_MODELS, "length", "aborted"])
        steps.append(step_plans(draw, len(steps) + 1, world, reason=reason, calls=(0, 0)))
    elif section == "round_trip":
        for _ in range(draw.integers(1, 3)):
            steps.append(step_plans(draw, len(steps) + 1, world, reason="toolUse", calls=(1, 1), extra=("abort",)))
        if draw.integers(0, 4) > 0:
            steps.append(step_plans(draw, len(steps) + 1, world, reason="stop", calls=(0, 0)))
    elif section == "terminals":
        for _ in range(draw.sampled_from([0, 0, 1, 2])):
            steps.append(step_plans(draw, len(steps) + 1, world, reason="toolUse", calls=(1, 2)))
        reason = draw.sampled_from(TERMINAL)
        most = 0 if reason == "toolUse" else 7
        steps.append(step_plans(draw, len(steps) + 1, world, reason=reason, calls=(0, most)))
    elif section == "concurrent":
        for _ in range(draw.sampled_from([1, 1, 2])):
            steps.append(step_plans(draw, len(steps) + 1, world, reason="toolUse", calls=(2, 7)))
        if draw.integers(0, 3) > 0:
            steps.append(step_plans(draw, len(steps) + 1, world, reason="stop", calls=(0, 0)))
    else:
        cancel = _any_abort_steps(draw, world, steps)
    return steps, cancel


def _any_abort_steps(draw: Draw, world: dict, steps: list[Step]) -> Cancel | None:
    going_on = draw.integers(1, 3)
    cancel_kind = draw.sampled_from([None, None, None, "streaming", "batch"])
    cancel_step = draw.integers(1, going_on)
    for n in range(1, going_on + 1):
        cancelled_here = cancel_kind == "batch" and n == cancel_step
        steps.append(step_plans(draw, n, world, reason="toolUse", calls=(1, 4) if cancelled_here else (1, 3),
                                extra=("watch",) if cancel_kind else ("abort", "abort", "watch"),
                                holders=cancelled_here))
    if draw.booleans():
        steps.append(step_plans(draw, going_on + 1, world, reason=draw.sampled_from(TERMINAL), calls=(0, 2)))
    if cancel_kind != "streaming" and draw.booleans():
        # The first call of a batch to finish aborts the run while its siblings still run (or hold, until
        # the caller cancels): the abort must not cut them short, nor turn the cancellation into an end.
        busiest = max(steps[:going_on], key=lambda step: len(step["finishOrder"]))
        abort_first(steps[cancel_step - 1] if cancel_kind else busiest, holding_sibling=not cancel_kind)
    return None if cancel_kind is None else {"step": cancel_step, "during": cancel_kind}


def any_plans(draw: Draw, section: str) -> Plan:
    """A hardening plan: anything the loop's collaborators may do, leaning towards `section`."""
    world = _world(draw)
    steps, cancel = _any_steps(draw, section, world)
    observer = draw.sampled_from(["absent", "present", "present", "present", "present"])
    if cancel is not None:
        observer = "present"  # a cancellation's events show what it did
    odds = {"abort": (3, 1, 5), "concurrent": (2, 8, 5), "terminals": (2, 2, 5), "pure_stop": (2, 6, 5)}.get(
        section, (3, 6, 5))
    if cancel is not None:  # the cancellation is the point of the plan: other ways to end it come seldom
        odds = (8, 1000, 5)

    # A section's own events are aimed at where its mistakes show: the first of each, and the last answer
    # (where a terminal answer is, or the end of the run).
    targets = [[kind, n] for kind in HOOKED for n in (1, 2, 3)] + 3 * [
        [kind, len(steps) if kind == "assistant_message" and steps else 1] for kind in FOCUS[section]]

    def hook(one_in: int):
        """None, or [event type, n]: the hook fires at the n-th event of that type (one plan in `one_in`)."""
        if observer != "present" or not draw.one_in(one_in):
            return None
        return targets[draw.integers(0, len(targets) - 1)]

    raise_at, abort_at, mutate_at = hook(odds[0]), hook(odds[1]), hook(odds[2])
    if cancel is not None:
        # An observer raising while the caller cancels: which of the two reaches the caller is asyncio's choice
        # (a TaskGroup prefers the error), not the chapter's, so no plan has both.
        raise_at = None
    elif raise_at is not None and draw.booleans():
        # The observer raises while a tool of the busiest batch holds: the loop must cancel it, not wait for it.
        batches = [step for step in steps if step["stopReason"] == "toolUse" and len(step["finishOrder"]) >= 2]
        if batches:
            hold_last(max(batches, key=lambda step: len(step["finishOrder"])))
    max_steps = draw.sampled_from([None, None, None, 1, 2, 3, 4, 6] if section != "abort"
                                  else [None, 1, 1, 2, 2, 3, 4])
    world["contextExtra"] = draw.one_in(3)
    mutate_after = draw.one_in(4)
    abort_before_start = draw.one_in(4 if section == "abort" else 20) and cancel is None
    return {**world, "observer": observer, "raiseAt": raise_at, "abortAt": abort_at, "mutateAt": mutate_at,
            "mutateAfter": mutate_after, "abortBeforeStart": abort_before_start,
            "maxSteps": max_steps, "cancel": cancel, "steps": steps}


def beyond_the_chapter(plan: Plan) -> list[str]:
    """The hardening promises (names of the contract's PROMISES) a plan leans on: none for a plan inside the
    chapter's contract."""
    calls = [call for step in plan["steps"] for call in step["calls"]]
    found = {
        "guarded-model": any(step["stopReason"] in FAILING_MODELS for step in plan["steps"]),
        "checked-executor": plan["executor"] == "injected" and any(
            call["does"] in INJECTED_ONLY + ["garbage", "not_json"] for call in calls),
        "observer-errors": plan["raiseAt"] is not None,
        "cancellation": plan["cancel"] is not None,
        "late-progress": any(call["late"] for call in calls),
        "exception-named": any(call["does"] == "raise_empty" for call in calls),
        "abort-anywhere": plan["abortAt"] is not None and not _aborts_where_the_chapter_says(plan),
    }
    return [name for name, leans in found.items() if leans]


def _aborts_where_the_chapter_says(plan: Plan) -> bool:
    """Whether the observer's abort comes while a batch runs: at a tool's event, or once a toolUse answer is
    complete (its batch then runs before the check after it). The chapter names no other abort point."""
    kind, n = plan["abortAt"]
    if kind in ("tool_start", "tool_progress", "tool_end"):
        return True
    steps = plan["steps"]
    return kind == "assistant_message" and n <= len(steps) and steps[n - 1]["stopReason"] == "toolUse" \
        and bool(steps[n - 1]["calls"])


# --- the chapter track: inside the chapter's contract --------------------------------------------------

@dataclass(frozen=True)
class PlanKind:
    """A kind of chapter-track plan: the section it exercises and the chapter's sentences it holds the loop to
    (names of the contract's CITES)."""

    section: str
    cites: tuple[str, ...]


KINDS: dict[str, PlanKind] = {
    "pure-stop": PlanKind("pure_stop", ("pure-stop", "turn-end")),
    "round-trip": PlanKind("round_trip", ("round-trip", "second-request")),
    "round-trip-progress": PlanKind("round_trip", ("progress-call-id", "round-trip")),
    "length": PlanKind("terminals", ("length-events", "pairing")),
    "other-terminal": PlanKind("terminals", ("other-terminals", "pairing")),
    "stop-with-calls": PlanKind("terminals", ("other-terminals", "incomplete-batch")),
    "tool-use-without-calls": PlanKind("terminals", ("incomplete-batch",)),
    "batch": PlanKind("concurrent", ("completion-order", "call-order")),
    "batch-rejection": PlanKind("concurrent", ("rejection", "error-message")),
    "abort-before-start": PlanKind("abort", ("abort-before-start",)),
    "abort-during-batch": PlanKind("abort", ("abort-during-batch", "signal-handed-over")),
    "max-steps": PlanKind("abort", ("max-steps", "steps-count")),
    "max-steps-one": PlanKind("abort", ("max-steps-one",)),
}

ON_THE_REGISTRY = ["succeed", "succeed", "succeed", "raise", "report_error", "not_json", "garbage", *REFUSED]
"""What a registry tool may do in the chapter track: the chapter 06 executor answers each with a result."""
INJECTED = ["succeed", "succeed", "succeed", "raise", "report_error"]
"""What an injected executor may do in the chapter track: answer its own call with a result, or reject."""
TEXTS = [False, True, "项目名是 tiny-pi。", "两行\nof text", "✓ done — 完成", "long " * 60]
"""An answer's text (False: none; True: "let me see")."""
CHAPTER_ABORTS = ["tool_start", "tool_progress", "tool_end"]


def _chapter_step(draw: Draw, number: int, world: dict, reason: str, calls: tuple[int, int],
                  extra: tuple[str, ...] = ()) -> Step:
    choices = INJECTED if world["executor"] == "injected" else ON_THE_REGISTRY
    if calls[1] > 1 and reason == "toolUse":
        # A call the chapter 06 executor refuses ends as its task starts, and the order a batch's tasks start
        # in is the loop's own (the chapter fixes only the order of tool_start and of the results): in a
        # batch of several, every call waits for its turn to finish.
        choices = [does for does in choices if does not in REFUSED]
    step = step_plans(draw, number, world, reason=reason, calls=calls, extra=extra, choices=choices,
                      progress=CHAPTER_PROGRESS)
    step["text"] = draw.sampled_from(TEXTS)
    return step


def _rounds(draw: Draw, world: dict, count: int, calls: tuple[int, int], extra: tuple[str, ...] = ()) -> list[Step]:
    return [_chapter_step(draw, n, world, "toolUse", calls, extra) for n in range(1, count + 1)]


def _pure_stop(draw: Draw, world: dict, plan: dict) -> str:
    plan["steps"] = [_chapter_step(draw, 1, world, "stop", (0, 0))]
    plan["maxSteps"] = draw.sampled_from([None, None, 1, 2, 32])
    return "pure-stop"


def _round_trip(draw: Draw, world: dict, plan: dict) -> str:
    quiet = draw.sampled_from([True, False, False])  # (one plan in three: no tool reports progress)
    steps = _rounds(draw, world, draw.integers(1, 3), (1, 1))
    steps.append(_chapter_step(draw, len(steps) + 1, world, "stop", (0, 0)))
    plan["steps"] = steps
    if quiet:
        for call in [call for step in steps for call in step["calls"]]:
            call["before"] = call["during"] = 0
    reported = any(call["before"] or call["during"] for step in steps for call in step["calls"])
    return "round-trip-progress" if reported else "round-trip"


def _terminals(draw: Draw, world: dict, plan: dict) -> str:
    steps = _rounds(draw, world, draw.sampled_from([0, 0, 1, 2]), (1, 2))
    reason = draw.sampled_from(["length", "length", "error", "aborted", "stop", "toolUse"])
    calls = {"toolUse": (0, 0), "stop": (1, 7)}.get(reason, (0, 7))
    steps.append(_chapter_step(draw, len(steps) + 1, world, reason, calls))
    plan["steps"] = steps
    return {"length": "length", "stop": "stop-with-calls", "toolUse": "tool-use-without-calls"}.get(
        reason, "other-terminal")


def _concurrent(draw: Draw, world: dict, plan: dict) -> str:
    steps = _rounds(draw, world, draw.sampled_from([1, 1, 2]), (2, 7))
    if draw.integers(0, 3) > 0:
        steps.append(_chapter_step(draw, len(steps) + 1, world, "stop", (0, 0)))
    plan["steps"] = steps
    rejected = world["executor"] == "injected" and any(
        call["does"] == "raise" for step in steps for call in step["calls"])
    return "batch-rejection" if rejected else "batch"


def _abort(draw: Draw, world: dict, plan: dict) -> str:
    kind = draw.sampled_from(["abort-before-start", "abort-during-batch", "abort-during-batch", "max-steps-one",
                              "max-steps"])
    if kind == "abort-before-start":
        steps = _rounds(draw, world, draw.integers(0, 1), (1, 2))
        plan["abortBeforeStart"] = True
    elif kind.startswith("max-steps"):
        plan["maxSteps"] = 1 if kind == "max-steps-one" else draw.integers(2, 4)
        steps = _rounds(draw, world, plan["maxSteps"] + draw.integers(0, 2), (1, 3))
    else:
        steps = _aborted_batches(draw, world, plan)
    steps.append(_chapter_step(draw, len(steps) + 1, world, "stop", (0, 0)))
    plan["steps"] = steps
    return kind


def _aborted_batches(draw: Draw, world: dict, plan: dict) -> list[Step]:
    """One to three rounds; while one of their batches runs, the run is aborted: by the batch's first call to
    finish (a sibling may run on a while, or watch the signal and stop), or by the observer at a tool's event
    or once the batch's answer is complete."""
    steps = _rounds(draw, world, draw.integers(1, 3), (1, 3))
    plan["maxSteps"] = draw.sampled_from([None, None, len(steps), len(steps) + 1])
    busiest = max(steps, key=lambda step: len(step["finishOrder"]))
    if draw.booleans() and busiest["finishOrder"]:
        _abort_by_a_tool(draw, busiest)
    else:
        n = draw.integers(1, len(steps))
        plan["abortAt"] = draw.sampled_from([[kind, n] for kind in CHAPTER_ABORTS] + [["assistant_message", n]])
    return steps


def _abort_by_a_tool(draw: Draw, step: Step) -> None:
    """The step's first call to finish aborts the run. Its last may instead run on for a while (`hold`), or
    watch the signal and stop (`watch`, when nothing else of the batch is left to finish then: a watching
    call and a sibling that end on the same turn of the event loop end in the order their tasks began, which
    is the loop's own)."""
    order = step["finishOrder"]
    sibling = draw.sampled_from([None, "hold", "watch"]) if len(order) >= 2 else None
    if sibling == "watch" and len(order) > 2:
        sibling = "hold"
    if sibling is not None:
        last = order.pop()
        next(c for c in step["calls"] if c["id"] == last)["does"] = sibling
        for call in step["calls"]:  # (the calls that wait for their turn wait for no running sibling to start)
            call["before"] = 0
    next(c for c in step["calls"] if c["id"] == order[0])["does"] = "abort"


BUILDERS = {"pure_stop": _pure_stop, "round_trip": _round_trip, "terminals": _terminals,
            "concurrent": _concurrent, "abort": _abort}


def chapter_plans(draw: Draw, section: str, *, through_the_registry: bool = False) -> Plan:
    """A chapter-track plan of `section`: inside the chapter's contract, of one of the section's kinds
    (`through_the_registry`: its calls go to the chapter 06 executor, through a registry)."""
    world = _world(draw, through_the_registry=through_the_registry)
    if section not in ("pure_stop", "round_trip"):
        world["registry"] = True  # (without it, the chapter 06 executor refuses every call: see _chapter_step)
    plan = {**world, "observer": draw.sampled_from(["absent", "present", "present", "present", "present"]),
            "raiseAt": None, "abortAt": None, "mutateAt": None, "mutateAfter": draw.one_in(4),
            "abortBeforeStart": False, "maxSteps": None, "cancel": None, "contextExtra": draw.one_in(3)}
    plan["kind"] = BUILDERS[section](draw, world, plan)
    if plan["abortAt"] is not None:
        plan["observer"] = "present"  # (only an observer aborts at an event)
    if plan["observer"] == "present" and draw.one_in(3):  # the caller changes its messages meanwhile
        plan["mutateAt"] = [draw.sampled_from(HOOKED), draw.integers(1, 3)]
    return plan


def cites_of(plan: Plan) -> tuple[str, ...]:
    """What a plan holds the loop to: its kind's sentences of the chapter (chapter track), or the hardening
    promises it leans on (hardening track; none for a hardening plan that stays inside the contract)."""
    kind = KINDS.get(plan.get("kind"))
    return kind.cites if kind is not None else tuple(beyond_the_chapter(plan))


def _strategy(section: str):
    if section in HARDENING_SECTIONS:
        return plans(any_plans, HARDENING_SECTIONS[section])
    return plans(chapter_plans, section)


STRATEGIES = {section: _strategy(section) for section in (*CHAPTER_SECTIONS, *HARDENING_SECTIONS)}
ANY_STRATEGIES = {section: _strategy(f"hardening_{section}") for section in CHAPTER_SECTIONS}
"""Every freedom of the loop's collaborators, per section (what chapter 06's in-the-loop plans draw from)."""
