"""The input's common field types: the JSON object `Model`, templates, checked strings and errors.

Every model of the input (logic/spec/*.py) is a `Model`; a rule the schema states is written once:
a constraint, a regex pattern (exact in ECMA-262 and Python `re`: ends are `(?![\\s\\S])`, since
Python's `$` also matches before a trailing newline), or a cross-field rule with its schema form.
Checks that raise ValueError name no field: pydantic's location of the error names it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from logic.described import kind

# The end of the string in both ECMA-262 and Python `re` (no multiline flag in either).
END = r"(?![\s\S])"
_FIELD = r"\{[^{}]+\}"
TEMPLATE_PATTERN = r"^(?:[^{}]|\{\{|\}\}|" + _FIELD + ")*" + END


# An absolute IRI: a scheme first; literal parts hold no character an IRI cannot (nor braces).
IRI_TEMPLATE_PATTERN = r'^[A-Za-z][A-Za-z0-9+.-]*:(?:[^{}\u0000-\u0020<>"|\\^`]|' + _FIELD + ")*" + END
IRI_SCHEME = r"[A-Za-z][A-Za-z0-9+.-]*:"


def fail(message: str, *at: str | int) -> PydanticCustomError:
    """An error `message` at the validated value's location, plus `at` (e.g. a sub-field)."""
    return PydanticCustomError("spec", "{message}", {"message": message, "at": at})


@dataclass(frozen=True)
class Checked:
    """A string that `check` accepts (it raises ValueError naming what is wrong); the schema states
    `pattern`, which accepts exactly the same strings (tests/runtime/test_input_schema.py)."""

    pattern: str
    check: Callable[[object], object]

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_before_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {**handler(schema), "pattern": self.pattern}


class _NotNull:
    """An Optional field whose None means absent: the input may leave it out but not give null."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_before_validator_function(_not_null, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        generated = handler(schema)
        branches = [branch for branch in generated.get("anyOf", ()) if branch != {"type": "null"}]
        return branches[0] if len(branches) == 1 else generated


def _not_null(value: object) -> object:
    if value is None:
        raise ValueError("must not be null (leave the field out instead)")
    return value


def no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def absent(description: str | None = None, *, alias: str | None = None) -> Any:
    """A field whose absence is None and whose null is refused (with NotNull); the normalized form
    leaves it out when absent. Kept as json_schema_extra: the schema shows no default, since null is
    not a value the input may give."""
    return Field(
        default=None, alias=alias, description=description, json_schema_extra=no_default, exclude_if=_is_none
    )


def _is_none(value: object) -> bool:
    return value is None


def omit_default(default: Any, **field: Any) -> Any:
    """A field the normalized form (the models' dump: logic/spec/parse.py spec_to_json) leaves out
    while it is at `default`. A field added to the input after its normalized form was recorded
    must be one: an input that does not give it keeps its normalized form, and so its plan id
    (tests/runtime/test_spec_golden.py); a graph element's `optional` is one such."""
    return Field(default=default, exclude_if=lambda value: value == default, **field)


ABSENT: Any = absent()
NotNull = _NotNull()


def matches(pattern: str, message: Callable[[object], str]) -> Checked:
    """A string matching `pattern` (run with `re.search`, as Python's jsonschema does)."""
    compiled = re.compile(pattern)

    def check(value: object) -> object:
        if not isinstance(value, str) or compiled.search(value) is None:
            raise ValueError(message(value))
        return value

    return Checked(pattern, check)


def split_template(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`{field}` template -> (literals, fields); `{{`/`}}` are literal braces. Raises ValueError.

    Rendering is `literals[0] + value(fields[0]) + literals[1] + ... + literals[-1]`.
    """
    literals: list[str] = []
    fields: list[str] = []
    buf: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "{}" and text.startswith(c * 2, i):
            buf.append(c)
            i += 2
        elif c == "{":
            close = text.find("}", i + 1)
            name = text[i + 1 : close]
            if close < 0 or "{" in name:
                raise ValueError(
                    f"unclosed '{{' at position {i} in {text!r} (write '{{{{' for a literal brace)"
                )
            if not name:
                raise ValueError(f"empty field name '{{}}' at position {i} in {text!r}")
            literals.append("".join(buf))
            buf = []
            fields.append(name)
            i = close + 1
        elif c == "}":
            raise ValueError(f"unmatched '}}' at position {i} in {text!r} (write '}}}}' for a literal brace)")
        else:
            buf.append(c)
            i += 1
    literals.append("".join(buf))
    return tuple(literals), tuple(fields)


def template_check(*, allow_empty: bool, iri: bool = False) -> Callable[[object], object]:
    def check(value: object) -> object:
        if not isinstance(value, str):
            raise ValueError(f'must be a template string like "ITEM#{{id}}", got {kind(value)}')
        if not value and not allow_empty:
            raise ValueError("must not be empty")
        literals, _ = split_template(value)
        if iri:
            check_iri_literals(value, literals)
        return value

    return check


def check_iri_literals(text: str, literals: tuple[str, ...]) -> None:
    """An IRI template starts with a scheme, and its literal parts hold no character an IRI cannot."""
    if not re.match(IRI_SCHEME, literals[0]):
        raise ValueError(
            f"an IRI template must start with a scheme such as http://example.org/, got {text!r}"
        )
    for literal in literals:
        bad = re.search(r'[\x00-\x20<>"{}|\\^`]', literal)
        if bad:
            raise ValueError(f"{bad.group()!r} may not appear in an IRI (in {text!r})")


@dataclass(frozen=True)
class Template:
    """A `{field}` template (`{{` and `}}` are literal braces), split once into literals and fields.

    Rendering is `literals[0] + value(fields[0]) + literals[1] + ... + literals[-1]`. In the input
    and its normalized form a template is its text (`TemplateSyntax` validates and serializes it).
    """

    text: str
    literals: tuple[str, ...]
    fields: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> Template:
        """Split `text` (raises ValueError when it is not a template)."""
        literals, fields = split_template(text)
        return cls(text, literals, fields)


@dataclass(frozen=True)
class TemplateSyntax:
    """A template string that `check` accepts, validated into a Template and dumped as its text; the
    schema states `pattern` (and `minLength`), which accept exactly the same strings."""

    pattern: str
    check: Callable[[object], object]
    min_length: int | None = None

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        text = core_schema.no_info_before_validator_function(
            self.check, core_schema.str_schema(min_length=self.min_length)
        )
        return core_schema.no_info_after_validator_function(
            Template.parse, text, serialization=core_schema.plain_serializer_function_ser_schema(_text)
        )

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {**handler(schema), "pattern": self.pattern}


def _text(template: Template) -> str:
    return template.text


TemplateText = Annotated[Template, TemplateSyntax(TEMPLATE_PATTERN, template_check(allow_empty=True))]
KeyTemplateText = Annotated[
    Template, TemplateSyntax(TEMPLATE_PATTERN, template_check(allow_empty=False), min_length=1)
]
IriTemplateText = Annotated[
    Template, TemplateSyntax(IRI_TEMPLATE_PATTERN, template_check(allow_empty=False, iri=True))
]


def _whole_number(value: object) -> object:
    if isinstance(value, float) and not isinstance(value, bool):
        if not value.is_integer():
            raise ValueError(f"must be a whole number, got {value!r}")
        return int(value)
    return value


WholeNumber = BeforeValidator(_whole_number)


def _unknown_field(name: str, allowed: list[str]) -> str:
    hint = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
    suggestion = f"did you mean {hint[0]!r}?" if hint else f"allowed: {', '.join(allowed)}"
    return f"unknown field {name!r} ({suggestion})"


class _Given(dict[str, Any]):
    """What a refused field's message names from the input; a name it cannot see here (e.g. the
    writeMode of the target holding an attribute) is left for the error formatter to fill in."""

    def __missing__(self, name: str) -> str:
        return f"{{{name}}}"


class Model(BaseModel):
    """A JSON object of the input: strict JSON types, unknown fields are errors."""

    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, alias_generator=to_camel, allow_inf_nan=False
    )
    # Fields another form of the input has, and why they are refused here ({format} is filled in;
    # {writeMode} by the error formatter, from the target branch the input named).
    refused: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            allowed = [field.alias or name for name, field in cls.model_fields.items()]
            for name in data:
                if name not in allowed:
                    why = cls.refused.get(name)
                    message = (
                        why.format_map(_Given(format=data.get("format")))
                        if why
                        else _unknown_field(str(name), allowed)
                    )
                    raise fail(message, str(name))
        return data


def shape(choose: Callable[[Any], str | None], wanted: str) -> Discriminator:
    """A union whose member `choose` picks (its tag); a value it picks none for "must be `wanted`"."""
    return Discriminator(choose, custom_error_type="spec_shape", custom_error_message=f"must be {wanted}")


def shown_name(name: str) -> str:
    """A name as a path part: quoted when it holds a newline or other unprintable character, so
    the error stays one line."""
    return name if name.isprintable() else repr(name)
