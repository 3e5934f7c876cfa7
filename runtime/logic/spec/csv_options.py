"""The input's `csv` options: how CSV lines split into fields, named by a header line or by `columns`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Discriminator, Field, Tag, model_validator

from logic.described import kind
from logic.spec.fields import END, Model, WholeNumber, fail, matches, omit_default

# csv.maxRecordBytes: a CSV record's bound, and so its longest quoted field (a quote left open at a
# field's start costs at most this much).
DEFAULT_MAX_RECORD_BYTES = 1024 * 1024
MIN_MAX_RECORD_BYTES = 64
MAX_MAX_RECORD_BYTES = 64 * 1024 * 1024


DELIMITER_PATTERN = r'^[^\n\r"]' + END
COMMENT_PATTERN = r"^[^\n\r]+" + END


def _delimiter_message(value: object) -> str:
    if not isinstance(value, str) or len(value) != 1:
        return f"must be one character, got {value!r}"
    return f"{value!r} cannot be a delimiter (newlines and '\"' have other meanings)"


Delimiter = Annotated[str, matches(DELIMITER_PATTERN, _delimiter_message)]
Comment = Annotated[
    str,
    matches(COMMENT_PATTERN, lambda v: f"must be null or a non-empty one-line prefix like '#', got {v!r}"),
]


# The words a BOOL attribute reads from text whatever csv.trueValues and csv.falseValues add (any case).
TRUE_WORDS = ("true", "1", "yes", "y", "t")
FALSE_WORDS = ("false", "0", "no", "n", "f")

Word = Annotated[str, Field(min_length=1)]
Cell = Annotated[str, matches(r"^[^\n\r]*" + END, lambda v: f"must be one-line text, got {v!r}")]


_NO_COLUMNS = "only allowed when csv.header is false (the header line names the columns)"
COLUMNS_REQUIRED = "required when csv.header is false: list the column names in order"


def _header(value: object) -> object:
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false, got {kind(value)}")
    return value


def _no_columns(value: object) -> object:
    if value is not None:
        raise ValueError(_NO_COLUMNS)
    return value


def _columns_given(value: object) -> object:
    if value is None:
        raise ValueError(COLUMNS_REQUIRED)
    return value


class _CsvLines(Model):
    """How CSV lines split into fields (named by a header line, or by `columns`)."""

    delimiter: Delimiter = Field(default=",", description="One character between fields.")
    comment: Comment | None = Field(default=None, description="Lines starting with this prefix are skipped.")
    max_record_bytes: Annotated[int, WholeNumber] = Field(
        default=DEFAULT_MAX_RECORD_BYTES,
        ge=MIN_MAX_RECORD_BYTES,
        le=MAX_MAX_RECORD_BYTES,
        description="A record whose quoted field is still open past this many bytes is rejected "
        "(record_too_large) and parsing resumes at its next line; a quoted field up to this size loads. "
        "Each shard also reads this much before its start.",
    )
    null_values: list[Cell] = omit_default(
        [],
        description='Cells that mean "no value", e.g. ["NA", "\\\\N"] or [""] for empty (compared as '
        "written, after skipInitialSpace): the attribute is left out when optional, a required one is "
        "the reject missing_field (a NULL attribute holds NULL).",
    )
    true_values: list[Word] = omit_default(
        [],
        description="Words a BOOL attribute reads as true (any case), beside true, 1, yes, y and t; "
        "they win over the default false words and over falseValues.",
    )
    false_values: list[Word] = omit_default(
        [],
        description="Words a BOOL attribute reads as false (any case), beside false, 0, no, n and f; "
        "they win over the default true words.",
    )
    skip_initial_space: bool = omit_default(
        False, description="Spaces after a delimiter are not part of the next field (header line too)."
    )


class CsvOptions(_CsvLines):
    """CSV whose first line (after blank and comment lines) names the columns (header true, the
    default); with header false, the input lists them (HeaderlessCsvOptions)."""

    header: Annotated[Literal[True], BeforeValidator(_header)] = Field(
        default=True, description="The first line (after blank and comment lines) names the columns."
    )
    columns: Annotated[None, BeforeValidator(_no_columns)] = Field(
        default=None, description="null: the header line names the columns."
    )
    model_config = ConfigDict(title="CsvOptions")


class HeaderlessCsvOptions(_CsvLines):
    """CSV without a header line: `columns` names the fields in order."""

    header: Literal[False]
    columns: Annotated[
        list[Annotated[str, Field(min_length=1)]], Field(min_length=1), BeforeValidator(_columns_given)
    ] = Field(
        description="Column names in order.",
        # Kept: uniqueItems, which no type states (the validator below names the duplicate).
        json_schema_extra={"uniqueItems": True},
    )

    @model_validator(mode="after")
    def _columns_are_unique(self) -> HeaderlessCsvOptions:
        seen: set[str] = set()
        for index, name in enumerate(self.columns):
            if name in seen:
                raise fail(f"duplicate column name {name!r}", "columns", index)
            seen.add(name)
        return self


def _csv_header(value: Any) -> str:
    """csv.header picks the form: false has columns; anything else is left to the header form."""
    if isinstance(value, HeaderlessCsvOptions) or (
        isinstance(value, Mapping) and value.get("header") is False
    ):
        return "~headerless"
    return "~header"


Csv = Annotated[
    Annotated[CsvOptions, Tag("~header")] | Annotated[HeaderlessCsvOptions, Tag("~headerless")],
    Discriminator(_csv_header),
]
