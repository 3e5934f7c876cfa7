"""Turn one record's fields into RDF terms by the input's `graph.statements` templates (stdlib only).

The result is plain tuples; runtime/adapters/rdf.py builds pyoxigraph terms from them and
serializes N-Quads, so escaping is the RDF library's, not ours. What is ours: a field value
substituted into an IRI is percent-encoded (it cannot end the IRI, add a fragment or change
its path), a value substituted into a blank node label is escaped to the label's alphabet,
and literals of the common XSD numeric and boolean types are checked for their lexical form
(Neptune's loader refuses a mistyped number).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any
from urllib.parse import quote

from logic.spec.fields import Template
from logic.spec.graph import XSD, LanguageLiteral, LiteralTerm, Statement, Term
from logic.spec.inputs import JobSpec
from logic.values import Fields, Reject, field_value

# ("iri", iri) | ("blank", label) | ("literal", text, datatype or None, language or None)
RenderedTerm = tuple[Any, ...]
# subject, predicate, object, graph name (None: the default graph)
RenderedStatement = tuple[RenderedTerm, RenderedTerm, RenderedTerm, RenderedTerm | None]

_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)")
_DOUBLE = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?INF|NaN")
_BOOLEAN = re.compile(r"true|false|1|0")
LEXICAL: Mapping[str, re.Pattern[str]] = {
    XSD + "integer": _INTEGER,
    XSD + "int": _INTEGER,
    XSD + "long": _INTEGER,
    XSD + "short": _INTEGER,
    XSD + "decimal": _DECIMAL,
    XSD + "double": _DOUBLE,
    XSD + "float": _DOUBLE,
    XSD + "boolean": _BOOLEAN,
}


class _Missing(Exception):
    def __init__(self, reject: Reject) -> None:
        self.reject = reject


def _text(value: Any) -> str | None:
    """A scalar field value as text; None for a missing/null value; raises TypeError naming what
    else it is (a JSON object or list, Parquet binary, a float that is no number)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, Decimal | int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"{value}, not a finite number")
        return repr(value)
    what = "binary" if isinstance(value, bytes) else f"a JSON {type(value).__name__}"
    raise TypeError(f"{what}, not a scalar")


def _blank_label(value: str) -> str:
    """Escape a value into the blank node label alphabet, injectively (`_` doubles, others `_HH`)."""
    out = []
    for char in value:
        if char.isascii() and (char.isalnum() or char == "-"):
            out.append(char)
        elif char == "_":
            out.append("__")
        else:
            out.extend(f"_{byte:02X}" for byte in char.encode("utf-8"))
    return "".join(out)


def _render(
    template: Template, fields: Fields, where: str, encode: Callable[[str], str] | None
) -> str | None:
    """The template with its fields substituted; None when a field is missing or null."""
    parts = [template.literals[0]]
    for name, literal in zip(template.fields, template.literals[1:], strict=True):
        try:
            value = _text(field_value(fields, name))
        except TypeError as error:
            raise _Missing(Reject("not_scalar", f"field {name!r} in {where} is {error}")) from None
        if value is None:
            return None
        if encode is not None:
            if value == "":
                raise _Missing(Reject("empty_value", f"field {name!r} in {where} is empty"))
            value = encode(value)
        parts.append(value)
        parts.append(literal)
    return "".join(parts)


def _term(term: Term, fields: Fields, where: str) -> RenderedTerm | None:
    """The rendered term, or None when an optional term's field is missing/null/empty."""
    if isinstance(term, Template):  # an IRI template string
        kind, template, optional = "iri", term, False
    else:
        kind, template, optional = term.kind, term.template, term.optional
    if kind == "iri":
        text = _render(template, fields, where, lambda value: quote(value, safe="-._~"))
    elif kind == "blank":
        text = _render(template, fields, where, _blank_label)
    else:
        text = _render(template, fields, where, None)
    if text is None or (optional and text == "" and kind == "literal"):
        if optional:
            return None
        missing = [name for name in template.fields if field_value(fields, name) is None]
        raise _Missing(Reject("missing_field", f"field {missing[0]!r} needed by {where} is missing or null"))
    if not isinstance(term, LiteralTerm | LanguageLiteral):
        return (kind, text)
    pattern = LEXICAL.get(term.datatype or "")
    if pattern is not None and not pattern.fullmatch(text):
        short = (term.datatype or "").removeprefix(XSD)
        raise _Missing(Reject("bad_literal", f"{text[:40]!r} in {where} is not a valid xsd:{short}"))
    return ("literal", text, term.datatype, term.language)


def _statement(statement: Statement, fields: Fields, where: str) -> RenderedStatement | None:
    subject = _term(statement.subject, fields, f"{where}.subject")
    predicate = _term(statement.predicate, fields, f"{where}.predicate")
    obj = _term(statement.object, fields, f"{where}.object")
    graph = _term(statement.graph, fields, f"{where}.graph") if statement.graph is not None else None
    if obj is None:  # an optional object whose field is absent: no statement
        return None
    assert subject is not None and predicate is not None  # only objects may be optional
    return (subject, predicate, obj, graph)


def make_graph_mapper(spec: JobSpec) -> Callable[[Fields], list[RenderedStatement] | Reject]:
    """Per-record mapper: the record's statements (maybe none, if every object is optional and absent)."""
    if spec.graph is None:
        raise ValueError("the spec has no graph section")
    statements = [(statement, f"graph.statements[{i}]") for i, statement in enumerate(spec.graph.statements)]

    def to_statements(fields: Fields) -> list[RenderedStatement] | Reject:
        out: list[RenderedStatement] = []
        try:
            for statement, where in statements:
                rendered = _statement(statement, fields, where)
                if rendered is not None:
                    out.append(rendered)
        except _Missing as missing:
            return missing.reject
        return out

    return to_statements


def is_rdf_comment(raw: bytes) -> bool:
    """An N-Quads/N-Triples line holding only a comment: not a statement, not a record."""
    return raw.lstrip(b" \t").startswith(b"#")
