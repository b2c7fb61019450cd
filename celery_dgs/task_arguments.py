"""A schedule's (or a deferred check's) ``args`` and ``kwargs`` checked
against its task's signature when the spec is stored, so that a call the task
cannot take (an unknown keyword, a missing argument) is refused then, naming
the schedule and field, and not at each run.

Only registered tasks are checked (their ``run`` method's signature, as
Celery checks a call's arguments); a task whose ``typing`` is ``False``
(Celery's switch for that check) or whose signature cannot be read is not.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .core.spec import ScheduleSpec
from .core.spec_build import SUGGESTION_CUTOFF, suggestion
from .core.spec_values import check_argument_size
from .errors import ScheduleConfigError

#: The registered tasks by name (``app.tasks``), or a callable giving them.
TaskRegistry = Mapping[str, Any]


def unknown_task(task: str, known: Iterable[str], *, declared: bool = False) -> str:
    """``unknown task 'proj.fetchh'; did you mean 'proj.fetch'?`` (among the
    app's own tasks); a ``declared`` one that is like none of them may be
    a function Celery does not know as a task."""
    own = [name for name in known if not name.startswith("celery.")]
    # Task names share their module's dotted prefix ('proj.'), which alone would make
    # 'proj.nope' look like 'proj.slow': a name is suggested only if its last
    # part is like the task's too.
    hint = suggestion(task, [name for name in own if _last_parts_alike(task, name)])
    if not hint and declared:
        hint = (
            "; is it a Celery task (@app.task below the @dgs decorator, in a module "
            "the app imports)?"
        )
    return f"unknown task {task!r}{hint}"


def _last_parts_alike(task: str, name: str) -> bool:
    """Whether the last dotted parts of ``task`` and ``name`` are alike (as
    :func:`~celery_dgs.core.spec_build.suggestion` measures it)."""
    ours, theirs = task.rpartition(".")[2], name.rpartition(".")[2]
    return difflib.SequenceMatcher(None, ours, theirs).ratio() >= SUGGESTION_CUTOFF


def task_signature(task: Any) -> inspect.Signature | None:
    """The signature a call of ``task`` is bound to (its ``run``), or None
    when it takes anything, is not checked (``typing=False``) or has none."""
    if getattr(task, "typing", True) is False:
        return None
    run = getattr(task, "run", None)
    if not callable(run):
        return None
    try:
        signature = inspect.signature(run)
    except (TypeError, ValueError):
        return None
    kinds = {p.kind for p in signature.parameters.values()}
    takes_anything = {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD} <= kinds
    required = any(
        p.default is inspect.Parameter.empty
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        for p in signature.parameters.values()
    )
    return None if takes_anything and not required else signature


class ArgumentChecks:
    """The checks of a spec's arguments where it enters: their JSON size
    (``max_argument_bytes``, :func:`~celery_dgs.core.spec_values.check_argument_size`)
    and, for a task of ``tasks``, its signature (read once per task)."""

    def __init__(
        self,
        tasks: TaskRegistry | Callable[[], TaskRegistry] | None = None,
        *,
        max_argument_bytes: int | None = None,
    ) -> None:
        self._tasks = tasks
        self.max_argument_bytes = max_argument_bytes
        self._signatures: dict[str, inspect.Signature | None] = {}

    def _signature(self, task_name: str) -> inspect.Signature | None:
        if task_name not in self._signatures:
            tasks = self._tasks() if callable(self._tasks) else self._tasks
            task = tasks.get(task_name) if tasks is not None else None
            self._signatures[task_name] = None if task is None else task_signature(task)
        return self._signatures[task_name]

    def check(
        self,
        spec: ScheduleSpec,
        *,
        size_known_below: int | None = None,
        texts: tuple[str | None, str | None] = (None, None),
    ) -> None:
        """ScheduleConfigError naming ``spec`` and field ``args`` or
        ``kwargs`` if its arguments are too large or do not fit its task.
        ``size_known_below``: a length the arguments' JSON is known not to
        exceed (the spec's whole JSON text), which spares measuring them."""
        limit = self.max_argument_bytes
        if limit is not None and (size_known_below is None or size_known_below > limit):
            check_argument_size(spec.name, spec.args, spec.kwargs, limit, texts=texts)
        signature = self._signature(spec.task)
        if signature is None:
            return
        why = _unknown_keyword(signature, spec.kwargs)
        if why is None:
            try:
                signature.bind(*spec.args, **spec.kwargs)
            except TypeError as exc:
                why = str(exc)
            else:
                return
        field = "kwargs" if "keyword" in why or "multiple values" in why else "args"
        raise ScheduleConfigError(
            spec.name,
            field,
            f"task {spec.task!r} cannot take these arguments: {why} "
            f"(its signature: {_shown(signature)})",
        )


_BY_KEYWORD = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _unknown_keyword(signature: inspect.Signature, kwargs: Mapping[str, Any]) -> str | None:
    """The error of the first keyword ``signature`` takes no parameter for
    (checked before a missing argument: a misspelt keyword leaves one missing)."""
    params = signature.parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    names = {p.name for p in params if p.kind in _BY_KEYWORD}
    unknown = next((key for key in kwargs if key not in names), None)
    return None if unknown is None else f"got an unexpected keyword argument {unknown!r}"


def _shown(signature: inspect.Signature) -> str:
    """``signature`` without its annotations: ``(url, depth=1)``."""
    empty = inspect.Parameter.empty
    return str(
        signature.replace(
            parameters=[p.replace(annotation=empty) for p in signature.parameters.values()],
            return_annotation=empty,
        )
    )
