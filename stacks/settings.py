"""What every unit's settings share: the refusal (`MaploadConfigError`), the coercions, `Section`, `Site`.

Each setting is one pydantic field, defined once beside the unit that reads it (data_settings.py,
loader_settings.py, graph_settings.py, monitoring_settings.py, pipeline_settings.py); config.py
composes them into one environment's `EnvironmentConfig`. This module holds what they share:
cdk.json values and CLI strings (`-c mapload:max_concurrency_cap=10`, `-c ...=true`, JSON lists
as strings) are coerced by the `before` validators below; a refusal is one line naming the
setting (`refusal`), worded from the field's own constraints.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, get_args

from annotated_types import Ge, Le
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

# An environment's name: its key under `environments` in cdk.json.
ENV_NAME = re.compile(r"^[a-z][a-z0-9]{0,15}$")
# A KMS key's ARN (the data key, the source buckets' keys).
KMS_KEY_ARN = r"arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+"


class MaploadConfigError(ValueError):
    """A cdk.json `mapload` setting is missing or wrong; the message names the field."""

    def __init__(self, field: str, message: str, *, during: str = "") -> None:
        """`during`: what was being done, said first (another environment's check, say)."""
        super().__init__(f"{during}{field}: {message}")
        self.field = field
        self.message = message

    def during(self, what: str) -> MaploadConfigError:
        """The same error, saying first what was being done when it was found."""
        return MaploadConfigError(self.field, self.message, during=f"{what}: ")


def invalid(message: str, at: str = "") -> PydanticCustomError:
    """A refusal whose message is used as it is; `at` extends the path (`.name`, `[2]`)."""
    return PydanticCustomError("mapload", "{message}", {"message": message, "at": at})


def rule_error(field: str, message: str) -> PydanticCustomError:
    """A refusal by a rule between settings, naming the setting to change."""
    return PydanticCustomError("mapload", "{message}", {"message": message, "field": field})


@dataclass(frozen=True)
class Says:
    """What a setting must be, in words, for its refusal: `must be <what>, got <value>`.

    Metadata only (pydantic ignores it): the constraint itself is the field's `pattern`.
    `item` is what each item of a list must be.
    """

    what: str
    item: str = ""
    # Null or "" is refused as "is required" (a setting that has a default too, like `branch`).
    required: bool = False


# --- Coercion of cdk.json and CLI values (`-c` values arrive as strings) ---------------------


def coerce_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value.strip()):
        return int(value)
    return None


def _parse_json_or(text: str, fallback: Any) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return fallback


def _absent_is_none(value: Any) -> Any:
    """The one "not set" rule: null in cdk.json, or "" / "null" as a `-c` string, is null."""
    return None if isinstance(value, str) and value.strip().lower() in {"", "null"} else value


def as_integer(value: Any) -> Any:
    """An integer, or a whole float or a string of digits (the CLI's); not a bool, not "5.0"."""
    if value is None or coerce_int(value) is not None:
        return value
    raise ValueError("not an integer")


def _number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError("not a number")
    return float(value) if isinstance(value, str) else value


def _flag(value: Any) -> bool:
    if isinstance(value, str) and value.lower() in {"true", "false"}:
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise ValueError("not a flag")
    return value


def as_list(value: Any) -> Any:
    """A JSON list, or (from the CLI) a JSON string or comma-separated names, as a tuple."""
    if isinstance(value, str):
        value = _parse_json_or(value, [part.strip() for part in value.split(",") if part.strip()])
    if not isinstance(value, list | tuple):
        raise ValueError("not a list")
    return tuple(value)


def once(noun: str) -> Callable[[tuple[str, ...]], tuple[str, ...]]:
    def check(names: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(names)) != len(names):
            raise invalid(f"must not name a {noun} twice")
        return names

    return check


def from_json(value: Any) -> Any:
    return _parse_json_or(value, value) if isinstance(value, str) else value


# After a setting's type and constraints: what a cdk.json or CLI value may be given as.
INTEGER: Final[BeforeValidator] = BeforeValidator(as_integer)
NUMBER: Final[BeforeValidator] = BeforeValidator(_number)
FLAG: Final[BeforeValidator] = BeforeValidator(_flag)
# After a nullable setting's type and constraints: "" and "null" (from the CLI) are null too.
NULLABLE: Final[BeforeValidator] = BeforeValidator(_absent_is_none)
Days = Annotated[int, Field(ge=1, le=3650), INTEGER]
Count = Annotated[int, Field(ge=1, le=10_000_000), INTEGER]
EnvironmentName = Annotated[str, Field(pattern=ENV_NAME.pattern)]


class Section(BaseModel):
    """Frozen settings; a field's alias is its name in cdk.json."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_alias=True, validate_by_name=False)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot set {name}")


class Site(Section):
    """Where an environment deploys, and whether its data outlives its stacks."""

    # The environment's name in cdk.json (its key under `environments`, not a setting).
    name: SkipJsonSchema[str]
    account: Annotated[
        str | None,
        Field(
            pattern=r"^[0-9]{12}$",
            description="the AWS account the environment deploys to (null: the CLI's current account)",
        ),
        NULLABLE,
        Says("a 12-digit AWS account id or null"),
    ] = None
    region: Annotated[
        str | None,
        Field(
            pattern=r"^[a-z]{2}(-[a-z]+)+-[0-9]+$",
            description="the AWS region the environment deploys to (null: the CLI's current region)",
        ),
        NULLABLE,
        Says("an AWS region such as eu-west-2 or null"),
    ] = None
    retain_data: Annotated[
        bool,
        Field(
            description="keep buckets, tables, logs and the alarm key when the stack is deleted; also "
            "turns on termination protection of the environment's stacks and deletion protection of its "
            "tables (and of the Neptune cluster, which leaves a final snapshot)"
        ),
        FLAG,
    ] = False


# A part missing or extra: the structured setting is refused as a whole.
_WHOLE: Final[frozenset[str]] = frozenset({"missing", "extra_forbidden", "unexpected_keyword_argument"})


def refusal(
    model: type[BaseModel], error: ValidationError, given: Mapping[str, Any], required: str = ""
) -> tuple[str, str]:
    """The first refusal as (setting path, message): `max_concurrency_cap`, `must be ...`.

    A rule's own refusal (`invalid`, `rule_error`) is used as it is; any other is worded from the
    field it is about: its `Says`, its bounds, its options, and the value as `given` (before a
    CLI string was coerced). `required` completes "is required" for a
    required field that was left out or null.
    """
    first = error.errors()[0]
    context = first.get("ctx") or {}
    loc = [str(part) if isinstance(part, str) else f"[{part}]" for part in first["loc"]]
    if first["type"] == "mapload":
        path = str(context.get("field") or ".".join(loc)) + str(context.get("at", ""))
        return path, str(context["message"])
    field = {str(info.alias or name): info for name, info in model.model_fields.items()}[loc[0]]
    path, says, value = loc[0], _says(field), first["input"]
    if loc[0] in given and (len(loc) == 1 or first["type"] in _WHOLE):
        # A setting refused as a whole is shown as given (a key parsed from its JSON, as checked).
        value = given[loc[0]]
        value = from_json(value) if _structure(field.annotation) is not None else value
    needed = field.is_required() or (says is not None and says.required)
    if needed and (first["type"] == "missing" or value in (None, "")):
        return path, f"is required{required}: {says.what if says else 'a value'}"
    if len(loc) > 1 and loc[1].startswith("["):
        path, what = path + loc[1], says.item if says else ""
        return path, f"must be {what}, got {value!r}"
    if len(loc) > 1 and first["type"] not in _WHOLE:
        # A part of a structured setting (partition_key.type): worded from that part's field.
        inner = _structure(field.annotation)
        if inner is not None and loc[1] in inner:
            return f"{path}.{loc[1]}", _must_be(inner[loc[1]], value)
    return path, _must_be(field, value)


def _structure(annotation: Any) -> dict[str, FieldInfo] | None:
    for candidate in (annotation, *get_args(annotation)):
        fields = getattr(candidate, "__pydantic_fields__", None)
        if fields is not None:
            return dict(fields)
    return None


def _says(field: FieldInfo) -> Says | None:
    return next((item for item in field.metadata if isinstance(item, Says)), None)


def _must_be(field: FieldInfo, value: Any) -> str:
    says = _says(field)
    if says is not None:
        return f"must be {says.what}, got {value!r}"
    low = next((item.ge for item in field.metadata if isinstance(item, Ge)), None)
    high = next((item.le for item in field.metadata if isinstance(item, Le)), None)
    types = {field.annotation, *get_args(field.annotation)}
    if low is not None and high is not None:
        if float in types:
            return f"must be a number between {low} and {high}, got {value!r}"
        hint = "a positive integer" if low == 1 else "an integer"
        return f"must be {hint} between {low} and {high}, got {value!r}"
    if bool in types:
        return f"must be true or false, got {value!r}"
    return f"must be one of {', '.join(map(str, get_args(field.annotation)))}, got {value!r}"
