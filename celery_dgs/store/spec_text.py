"""A spec's canonical JSON text (``convert.spec_json``: sorted keys, no
spaces, no NaN) built in pieces, for bulk writers that store many specs of
one shape: the text is cut once around the values its specs differ in, and
each spec's text is the pieces joined with its own encoded values."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from typing import Any, cast

#: The encoder of ``spec_json``'s values; built once (``json.dumps`` with
#: options builds one per call).
ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False)
#: How ``json.dumps`` writes a string (its C encoder).
encode_str: Any = json.encoder.encode_basestring_ascii


def plain(value: Any) -> str | None:
    """A string or an int (not a bool) as ``json.dumps`` writes it; None for others."""
    kind = type(value)
    if kind is str:
        return str(encode_str(value))
    if kind is int:
        return int.__repr__(value)
    return None


def plain_list(items: Sequence[Any]) -> str | None:
    """The JSON text of a list of strings and ints, without the encoder; None
    if an item is anything else."""
    try:  # strings alone, the common case, in one pass of the C string encoder
        return "[" + ",".join(map(encode_str, items)) + "]"
    except TypeError:
        pass
    parts = [plain(v) for v in items]
    if None in parts:
        return None
    return "[" + ",".join(cast(list[str], parts)) + "]"


def plain_dict(mapping: Mapping[str, Any]) -> str | None:
    """The JSON text (sorted keys) of a mapping of string keys to strings and
    ints, without the encoder; None if a value is anything else."""
    parts = []
    for key in sorted(mapping):
        text = plain(mapping[key])
        if text is None:
            return None
        parts.append(encode_str(key) + ":" + text)
    return "{" + ",".join(parts) + "}"


class SpecPieces:
    """The canonical JSON text of ``data`` (a spec's ``to_dict()``) cut around
    the values of ``sentinels``' fields. ``pieces`` is None when the text
    cannot be cut at exactly one place per field (a sentinel also occurs in
    a value): the caller then encodes each spec whole."""

    __slots__ = ("_pick", "_template", "order", "pieces")

    def __init__(self, data: Mapping[str, Any], sentinels: Mapping[str, str]) -> None:
        self.pieces: list[str] | None = None
        self._template = ""
        self._pick = _picker(())
        #: For each gap between pieces, the index (in ``sentinels``' order) of its value.
        self.order: tuple[int, ...] = tuple(range(len(sentinels)))
        text = ENCODER.encode({**data, **sentinels})
        marks = {field: encode_str(s) for field, s in sentinels.items()}
        if any(text.count(mark) != 1 for mark in marks.values()):
            return
        positions = sorted((text.index(mark), field) for field, mark in marks.items())
        pieces, at = [], 0
        for pos, field in positions:
            pieces.append(text[at:pos])
            at = pos + len(marks[field])
        pieces.append(text[at:])
        fields = list(sentinels)
        self.pieces = pieces
        self.order = tuple(fields.index(field) for _, field in positions)
        #: The pieces as a ``%`` template, and the getter of the values in its order.
        self._template = "%s".join(piece.replace("%", "%%") for piece in pieces)
        self._pick = _picker(self.order)

    def join(self, values: Sequence[str]) -> str | None:
        """The text with ``values`` (encoded, in ``sentinels``' order) in place;
        None if the text could not be cut."""
        if self.pieces is None:
            return None
        return self._template % self._pick(values)


def _picker(order: tuple[int, ...]) -> Callable[[Sequence[str]], tuple[str, ...]]:
    """The getter of ``values[i] for i in order``, as a tuple."""
    if len(order) > 1:
        return itemgetter(*order)
    return lambda values: tuple(values[i] for i in order)
