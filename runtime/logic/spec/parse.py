"""Parse the execution input (version 1) into the JobSpec, word its errors, and give its normalized form.

The JobSpec is the validated input model itself (logic/spec/inputs.py; schemas/input.schema.json is
generated from it), validated with the table's key as context. Here: parse_spec, the first pydantic
error as one line naming the field, jobId from the execution's name, and the normalized form Plan
hands the Workers (spec_to_json: the models' own dump, every default explicit). Every error is an
InputValidationError whose `field` is the path of the offending value, e.g. `dynamodb.key.sk`.
The checks that need the data or the deployment are in logic/spec/checks.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from logic.described import kind as kind_of
from logic.errors import InputValidationError
from logic.s3uri import s3_parts
from logic.spec.checks import check_fields, check_property_types
from logic.spec.csv_options import COLUMNS_REQUIRED
from logic.spec.dynamodb import WRITE_MODES
from logic.spec.fields import Template, shown_name, template_check
from logic.spec.graph import PropertyGraph
from logic.spec.inputs import FORMATS, JOB_ID_PATTERN, Input, JobSpec

KEY_TYPES = ("S", "N", "B")
_INPUT: TypeAdapter[JobSpec] = TypeAdapter(Input)
_JOB_ID = re.compile(JOB_ID_PATTERN)


def parse_s3_uri(uri: object, field: str = "source") -> tuple[str, str]:
    """`s3://bucket/key` -> (bucket, key); the key is a prefix when it is empty or ends with "/"."""
    try:
        return s3_parts(uri)
    except ValueError as error:
        raise InputValidationError(field, str(error)) from None


def parse_template(text: object, field: str, *, allow_empty: bool = True) -> Template:
    """Split a template once, so that rendering per record is a join of prepared parts."""
    try:
        template_check(allow_empty=allow_empty)(text)
        return Template.parse(str(text))
    except ValueError as error:
        raise InputValidationError(field, str(error)) from None


def parse_spec(
    raw: Mapping[str, Any],
    *,
    table_key: Mapping[str, str] | None,
    execution_name: str | None = None,
) -> JobSpec:
    """Validate an execution input against the target table's key schema.

    `table_key` maps key attribute names to S|N|B, partition key first (the TABLE_KEY setting, or
    the named table's key Plan read); None: the key is left as given, unchecked (Prepare, before
    Plan has read a named table's key). `execution_name` is the jobId when the input gives none.
    Raises InputValidationError.
    """
    key_schema = _table_key(table_key) if table_key is not None else None
    if not isinstance(raw, Mapping):
        raise InputValidationError("$", f"the execution input must be a JSON object, got {kind_of(raw)}")
    try:
        given = _INPUT.validate_python(dict(raw), context={"table_key": key_schema})
    except ValidationError as error:
        described = _described(key_schema) if key_schema is not None else "the table's key"
        raise _input_error(error.errors()[0], described) from None
    spec = given.model_copy(update={"job_id": _job_id(given.job_id or None, execution_name)})
    if isinstance(spec.graph, PropertyGraph):
        check_property_types("vertices", spec.graph.vertices)
        check_property_types("edges", spec.graph.edges)
    if spec.csv is not None and spec.csv.columns is not None:
        check_fields(spec, spec.csv.columns)
    return spec


def spec_to_json(spec: JobSpec) -> dict[str, Any]:
    """The normalized input: the models' own dump, every default explicit except a field's the
    models leave out while at its default (fields.omit_default; an absent field: fields.absent).
    parse_spec of it gives back an equal JobSpec; the plan id hashes it."""
    return spec.model_dump(by_alias=True)


def _table_key(table_key: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    # A bad TABLE_KEY is a deployment error, not the user's input: ValueError, not InputValidationError.
    items = tuple(table_key.items())
    if not 1 <= len(items) <= 2 or any(t not in KEY_TYPES for _, t in items):
        raise ValueError(f"table_key must map 1 or 2 key attribute names to S|N|B, got {dict(table_key)!r}")
    return items


def _described(key_schema: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"{name} ({kind})" for name, kind in key_schema)


def _job_id(given: str | None, execution_name: str | None) -> str:
    if given is not None:
        return given
    if execution_name is None:
        raise InputValidationError("jobId", "required when the execution has no name")
    if _JOB_ID.search(execution_name) is None:
        raise InputValidationError(
            "jobId",
            f"not given, and the execution name {execution_name!r} is not a valid jobId "
            "(1-80 letters, digits, '.', '_' or '-'); give jobId",
        )
    return execution_name


# How a pydantic error type reads (ctx holds the constraint, e.g. `gt`); `{kind}` names the value.
_MESSAGES = {
    "missing": "required",
    "bool_type": "must be true or false, got {kind}",
    "float_type": "must be a number, got {kind}",
    "int_type": "must be a number, got {kind}",
    "finite_number": "must be a finite number, got {kind}",
    "string_type": "must be a string, got {kind}",
    "list_type": "must be a list, got {kind}",
    "model_type": "must be an object, got {kind}",
    "dict_type": "must be an object, got {kind}",
    "greater_than": "must be more than {gt}, got {shown}",
    "greater_than_equal": "must be at least {ge}, got {shown}",
    "less_than_equal": "must be at most {le}, got {shown}",
    "too_short": "must have at least one item",
    "too_long": "must have at most {max_length} items, got {actual_length}",
    "string_too_short": "must be a non-empty string",
    "literal_error": "must be one of {expected}, got {shown}",
    "spec_shape": "{msg}, got {kind}",
}
# What an error means at one field, where the generic wording says too little.
_AT_FIELD = {
    ("source", "missing"): "required: the object or prefix to load, like s3://bucket/data.csv",
    ("graph.statements", "missing"): "required for CSV/JSON Lines: a non-empty list of "
    '{{"subject": ..., "predicate": ..., "object": ...}}',
    ("graph.statements", "too_short"): "required for CSV/JSON Lines: a non-empty list of "
    '{{"subject": ..., "predicate": ..., "object": ...}}',
    ("graph.statements", "too_long"): "not allowed with an RDF format: each line already is a statement",
    ("dynamodb.key", "missing"): "required: an object with a template for each key attribute of the table: "
    "{described}",
    ("dynamodb.version", "missing"): "required when writeMode is newerWins: the attribute (type N) "
    "that orders records",
    ("csv.columns", "missing"): COLUMNS_REQUIRED,
    ("csv", "model_type"): 'must be an object like {{"header": true, "delimiter": ","}}, got {kind}',
}
# The longest value an error message repeats; a longer one is cut (a 400-digit number, a long text).
_SHOWN_CHARS = 60


def _input_error(error: ErrorDetails, described: str) -> InputValidationError:
    """pydantic's error as one line naming the field (its tags, `~...` and the format, left out)."""
    kind, ctx, value = error["type"], dict(error.get("ctx") or {}), error["input"]
    if kind == "spec_format":
        fmt = value.get("format") if isinstance(value, Mapping) else None
        if fmt is None:
            given = isinstance(value, Mapping) and "format" in value
            return InputValidationError(
                "format", f"{'must not be null' if given else 'required'}: one of {', '.join(FORMATS)}"
            )
        return InputValidationError(
            "format", f"{_shown(fmt)} is not supported; use one of: {', '.join(FORMATS)}"
        )
    loc = [part for part in error["loc"][1:] if not (isinstance(part, str) and part.startswith("~"))]
    if kind == "spec_graph_model":
        return InputValidationError(
            _path([*loc, "model"]),
            f'must be "rdf" (the default) or "property", got {_shown(value.get("model"))}',
        )
    if kind == "spec_write_mode":
        return InputValidationError(
            _path([*loc, "writeMode"]),
            f"must be one of {', '.join(WRITE_MODES)}, got {_shown(value.get('writeMode'))}",
        )
    if "[key]" in loc:  # a dict's key: the error is about the object holding it
        why = str(ctx["error"]) if kind == "value_error" else "names must be non-empty strings"
        return InputValidationError(_path(loc[: loc.index("[key]") - 1]), why)
    if kind == "spec":
        return InputValidationError(_path([*loc, *ctx["at"]]), _in_mode(ctx["message"], error["loc"]))
    path = _path(loc)
    if kind == "value_error":
        return InputValidationError(path, str(ctx["error"]))
    if kind == "literal_error":
        ctx["expected"] = ", ".join(re.findall(r"'([^']*)'", ctx["expected"]))
    template = _AT_FIELD.get((path, kind)) or _MESSAGES.get(kind, "{msg}")
    for bound in ("gt", "ge", "le"):
        if bound in ctx:
            ctx[bound] = _number(ctx[bound])
    return InputValidationError(
        path,
        template.format(
            **ctx,
            kind=kind_of(value),
            shown=_shown(value),
            msg=error["msg"],
            described=described,
        ),
    )


_MODE_TAGS = {f"~{mode}" for mode in WRITE_MODES}


def _in_mode(message: str, loc: Sequence[str | int]) -> str:
    """A message naming `{writeMode}`, with the mode of the target branch the input named."""
    modes = [part[1:] for part in loc if isinstance(part, str) and part in _MODE_TAGS]
    return message.replace("{writeMode}", repr(modes[-1])) if modes else message


def _number(bound: Any) -> Any:
    """A bound as people write it: 0 rather than 0.0."""
    return int(bound) if isinstance(bound, float) and bound.is_integer() else bound


def _shown(value: Any) -> str:
    """A value as an error message repeats it: its repr, cut to _SHOWN_CHARS characters."""
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else f"{text[: _SHOWN_CHARS - 3]}... ({len(text)} characters)"


def _path(loc: Sequence[str | int]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{shown_name(part)}" if path else shown_name(part)
    return path or "$"
