"""The docs name only what exists: links, `make` targets, `mapload` flags and input fields.

Pages: README.md and every docs/*.md. What counts as "named", and what it must match:
- **Links**: every Markdown link `[text](target)` outside fenced code blocks whose target has no
  URL scheme (`https:`, `mailto:`, ...) names a file or folder that exists, relative to the page;
  its `#anchor`, if any (alone: the same page), is the GitHub slug of a heading on the target page.
- **make targets**: every `make TARGET` written as a command, that is an inline code span or a
  line of a shell block (```sh, bash, shell or console) starting with `make ` (after leading
  blanks), names a target of the Makefile. Other fenced blocks (layouts, benchmark output) are not
  commands.
- **CLI flags**: every `mapload SUBCOMMAND` written as a command (an inline code span or a line of a
  shell block, also as `.venv/bin/mapload`) names a subcommand of `mapload.cli.parser()`, and every
  `--flag` after it in the same span or line (up to a `#` comment) is an option of that subcommand.
- **Spec fields**: in docs/INPUT.md, the first cell of every table row that is a backticked name
  (dotted for nesting, `<name>` for a name the user chooses) names input fields: each dotted part
  but `<name>` is a property name somewhere in schemas/input.schema.json. And every ```json block in
  the docs that is an input (an object with `source`) validates against that schema (its
  placeholder bucket, `SOURCE-BUCKET`, read in lower case), so every field an example uses exists;
  so does every ```json block that is a `run-local` spec (an object with `format`, no `source`).
- **Examples run** (marked e2e: a few minutes): every such input in the docs, and every spec in
  examples/, goes through the embedded run on a small file — the ```csv (or other data) block
  shown before it on its page, else the test's own file named by its `source` — and must succeed,
  reconcile, reject nothing and (with a graph target) complete its graph load.
- **Input and report fields in prose**: in the input and report references, the bad-input catalogue
  and the graph guide, every inline code span that is a dotted name (`graph.maxDanglingPercent`,
  `records.skipped`) whose first part is a top-level field of the input or the report names fields:
  each part but `<name>` is a property name in schemas/input.schema.json or report.schema.json.
  Not fields: file names (`rejects.jsonl`) and the Python names in NOT_FIELDS.
Fast: no synth, no AWS; the parser is built as the command builds it.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SCHEMA: dict[str, Any] = json.loads((ROOT / "schemas" / "input.schema.json").read_text(encoding="utf-8"))
REPORT_SCHEMA: dict[str, Any] = json.loads(
    (ROOT / "schemas" / "report.schema.json").read_text(encoding="utf-8")
)
REFERENCES = [ROOT / "docs" / name for name in ("INPUT.md", "REPORT.md", "BAD_INPUT.md", "NEPTUNE.md")]
DOTTED = re.compile(r"[a-z][A-Za-z]*(?:\.[A-Za-z<>]+)+")
FILE_SUFFIXES = {"csv", "gz", "json", "jsonl", "md", "nq", "zip"}
NOT_FIELDS = {"csv.reader"}  # Python's csv module: how a CSV record is read

FENCE = re.compile(r"^ {0,3}(?:```|~~~)(\w*)")
SHELL = {"sh", "bash", "shell", "console"}
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
CODE_SPAN = re.compile(r"`([^`]+)`")
MAKE = re.compile(r"^\s*make ([A-Za-z0-9_.-]+)")
MAPLOAD = re.compile(r"(?:^|[\s/])mapload ([a-z][a-z0-9-]*)(.*)")
FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*)")


def split_fences(text: str) -> tuple[str, list[str]]:
    """The page without its fenced blocks (their lines blanked), and the lines of its shell blocks."""
    prose: list[str] = []
    shell: list[str] = []
    language: str | None = None  # None: outside a fenced block
    for line in text.splitlines():
        fence = FENCE.match(line)
        if fence:
            language = fence.group(1) if language is None else None
            prose.append("")
        elif language is not None:
            if language in SHELL:
                shell.append(line)
            prose.append("")
        else:
            prose.append(line)
    return "\n".join(prose), shell


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    prose, _ = split_fences(text)
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", prose, flags=re.MULTILINE):
        base = slug(heading)
        name, n = base, 0
        while name in found:  # GitHub numbers repeated headings: x, x-1, x-2
            n += 1
            name = f"{base}-{n}"
        found.add(name)
    return found


def broken_links(page: Path, text: str) -> list[str]:
    prose, _ = split_fences(text)
    problems = []
    for target in LINK.findall(prose):
        if SCHEME.match(target):
            continue
        path, _, anchor = target.partition("#")
        if not path:  # an anchor on this page
            if anchor not in anchors(text):
                problems.append(f"{target}: no such heading on this page")
            continue
        file = (page.parent / path).resolve()
        if not file.exists():
            problems.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text(encoding="utf-8")):
            problems.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    return problems


def code_snippets(text: str) -> Iterator[str]:
    """Inline code spans (whitespace collapsed, so a span may wrap) and the lines of shell blocks."""
    prose, shell = split_fences(text)
    for span in CODE_SPAN.findall(prose):
        yield " ".join(span.split())
    yield from shell


def make_targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z0-9_.-]+):(?!=)", makefile, flags=re.MULTILINE))


def unknown_make_targets(text: str, targets: set[str]) -> list[str]:
    named = {m.group(1) for snippet in code_snippets(text) if (m := MAKE.match(snippet))}
    return sorted(named - targets)


@cache
def cli_options() -> dict[str, frozenset[str]]:
    """Each subcommand of the `mapload` command and its option strings, from the parser it runs."""
    from mapload.cli import parser

    (sub,) = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return {name: frozenset(p._option_string_actions) for name, p in sub.choices.items()}


def unknown_cli_names(text: str, options: dict[str, frozenset[str]]) -> list[str]:
    problems = []
    for snippet in code_snippets(text):
        for m in MAPLOAD.finditer(snippet):
            command, rest = m.group(1), m.group(2).split(" #", 1)[0]
            if command not in options:
                problems.append(f"mapload {command}: no such subcommand")
                continue
            problems += [
                f"mapload {command} --{flag}: no such option"
                for flag in FLAG.findall(rest)
                if f"--{flag}" not in options[command]
            ]
    return problems


def schema_properties(node: Any) -> set[str]:
    """Every property name anywhere in a JSON Schema."""
    names: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                names |= set(value)
            names |= schema_properties(value)
    elif isinstance(node, list):
        for value in node:
            names |= schema_properties(value)
    return names


def input_fields_named(text: str) -> list[str]:
    prose, _ = split_fences(text)
    return re.findall(r"^\| `([A-Za-z<>][\w.<>]*)` \|", prose, flags=re.MULTILINE)


def unknown_input_fields(text: str, properties: set[str]) -> list[str]:
    return [
        name
        for name in input_fields_named(text)
        if any(part not in properties for part in name.split(".") if part != "<name>")
    ]


def top_level_fields() -> set[str]:
    """The input's top-level fields (of each format's model) and the report's."""
    inputs = [SCHEMA, *SCHEMA.get("$defs", {}).values()]
    return {name for node in [*inputs, REPORT_SCHEMA] for name in node.get("properties", {})}


def unknown_dotted_fields(text: str, tops: set[str], properties: set[str]) -> list[str]:
    prose, _ = split_fences(text)
    return [
        span
        for span in CODE_SPAN.findall(prose)
        if DOTTED.fullmatch(span)
        and span.split(".")[0] in tops
        and span.split(".")[-1] not in FILE_SUFFIXES
        and span not in NOT_FIELDS
        and any(part not in properties for part in span.split(".") if part != "<name>")
    ]


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """Every ``` block of a page, in order: (its language, its text)."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def _is_input(doc: Any) -> bool:
    """An execution input (with `source`), or a run-local spec (`format`, no `source`)."""
    return isinstance(doc, dict) and ("source" in doc or "format" in doc)


def json_inputs(text: str) -> list[Any]:
    """Every ```json block that is an execution input or a run-local spec."""
    return [
        doc for lang, body in fenced_blocks(text) if lang == "json" and _is_input(doc := json.loads(body))
    ]


# The small files the examples that name a `source` (and the specs in examples/) run on, by name.
EXAMPLE_FILES = {
    "ukpostcodes.csv": "postcode,latitude,longitude\nAB1 0AA,57.101,-2.242\nAB1 0AB,57.102,-2.246\n",
    "data.nq": (
        '<http://example.org/ada> <http://xmlns.com/foaf/0.1/name> "Ada" <http://example.org/g> .\n'
        "<http://example.org/ada> <http://xmlns.com/foaf/0.1/knows> <http://example.org/grace> .\n"
    ),
    "people.csv": "id,name,age,manager\n1,Ada,36,3\n2,Alan,41,3\n3,Grace,,3\n",
    # A Parquet file's rows as JSON Lines (the run writes them as Parquet: parquet_file).
    "orders.parquet": (
        '{"order_id": "o-1001", "customer": "c-17", "total": 25.5, "paid": true}\n'
        '{"order_id": "o-1002", "customer": "c-23", "total": 9.99, "paid": false}\n'
    ),
}
EXAMPLE_SPEC_FILES = {"postcodes.spec.json": "ukpostcodes.csv", "nquads.spec.json": "data.nq"}
TABLE_NAMED = re.compile(r"mapload-dev-StoreTable\w+")
DATA_LANGUAGES = {"csv": "csv", "jsonl": "jsonl", "nquads": "nq", "ntriples": "nt"}


def runnable_examples() -> list[tuple[str, dict[str, Any], str, str]]:
    """(id, spec without `source`, file name, file text) of every input in the docs and examples/:
    the file is the data block shown before the input on its page, else EXAMPLE_FILES' by name."""
    found = []
    for page in PAGES:
        data: tuple[str, str] | None = None
        inputs = 0
        for lang, body in fenced_blocks(page.read_text(encoding="utf-8")):
            if lang in DATA_LANGUAGES:
                data = (f"example.{DATA_LANGUAGES[lang]}", body)
            elif lang == "json" and _is_input(doc := json.loads(body)):
                source = str(doc.pop("source", ""))
                name = source.rsplit("/", 1)[-1]
                file = (name, EXAMPLE_FILES[name]) if source else data
                assert file is not None, f"{page_id(page)}: a spec with no source and no data block before it"
                found.append((f"{page_id(page)}#{inputs}", doc, *file))
                inputs += 1
    for path in sorted((ROOT / "examples").glob("*.spec.json")):
        name = EXAMPLE_SPEC_FILES[path.name]
        found.append((f"examples/{path.name}", json.loads(path.read_text()), name, EXAMPLE_FILES[name]))
    return found


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_relative_link_resolves_to_a_file_and_heading(page: Path) -> None:
    assert broken_links(page, page.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_make_target_named_exists(page: Path) -> None:
    assert unknown_make_targets(page.read_text(encoding="utf-8"), make_targets()) == []


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_mapload_subcommand_and_flag_named_exists(page: Path) -> None:
    assert unknown_cli_names(page.read_text(encoding="utf-8"), cli_options()) == []


def test_every_input_field_the_input_reference_names_is_in_the_schema() -> None:
    text = (ROOT / "docs" / "INPUT.md").read_text(encoding="utf-8")
    assert len(input_fields_named(text)) >= 30  # the rule still finds the reference's table
    assert unknown_input_fields(text, schema_properties(SCHEMA)) == []


@pytest.mark.parametrize("page", REFERENCES, ids=page_id)
def test_every_dotted_input_or_report_field_named_in_the_references_exists(page: Path) -> None:
    properties = schema_properties(SCHEMA) | schema_properties(REPORT_SCHEMA)
    assert unknown_dotted_fields(page.read_text(encoding="utf-8"), top_level_fields(), properties) == []


def test_every_input_example_in_the_docs_is_valid() -> None:
    examples = [doc for page in PAGES for doc in json_inputs(page.read_text(encoding="utf-8"))]
    assert len(examples) >= 5  # the README's console input and run-local spec, the graph guide's
    for example in examples:
        source = example.get("source", "s3://source-bucket/run-local")  # run-local fills it in
        jsonschema.validate({**example, "source": source.lower()}, SCHEMA)


# Examples that do not run yet, and why (each an open item: remove it with the fix; strict, so the
# fix's own run says so).
# Examples known not to run yet, by id, with the reason (strict: one that starts to run fails here).
NOT_YET: dict[str, str] = {}


def _example_params() -> list[Any]:
    params = []
    for name, *example in runnable_examples():
        marks = [pytest.mark.xfail(reason=NOT_YET[name], strict=True)] if name in NOT_YET else []
        params.append(pytest.param(*example, id=name, marks=marks))
    return params


@pytest.mark.e2e
@pytest.mark.xdist_group("e2e")
@pytest.mark.parametrize(("spec", "name", "text"), _example_params())
def test_every_example_input_runs_as_written(
    tmp_path: Path, spec: dict[str, Any], name: str, text: str
) -> None:
    from mapload.local import run_local

    source = tmp_path / name
    source.write_text(text, encoding="utf-8")
    if name.endswith(".parquet"):
        parquet_file(source)

    report = run_local(source, spec, report_path=tmp_path / "report.json", quiet=True)

    assert report["status"] == "SUCCEEDED", report["error"]
    records = report["records"]
    assert records["read"] == records["written"] + records["skipped"] + records["rejected"] > 0
    assert records["rejected"] == 0, report["rejects"]
    if "graph" in spec:
        assert report["graph"]["status"] == "LOAD_COMPLETED", report["graph"]
    if "dynamodb" in spec:  # a table the docs name (to scan it) is the one the run writes
        named = {name for page in PAGES for name in TABLE_NAMED.findall(page.read_text(encoding="utf-8"))}
        assert named <= {report["dynamodb"]["table"]}


def parquet_file(path: Path) -> None:
    """Rewrite `path`, JSON Lines rows, as a Parquet file of those rows (types as pyarrow infers)."""
    import pyarrow.json
    import pyarrow.parquet

    pyarrow.parquet.write_table(pyarrow.json.read_json(path), path)


@pytest.mark.e2e
@pytest.mark.xdist_group("e2e")
def test_the_readme_walkthrough_runs_as_written_in_another_region(tmp_path: Path) -> None:
    """The README's "Your own file in five minutes", command by command in a shell, against
    `mapload serve`, with a region other than us-east-1 and no credentials or tool beyond the
    project's: `mapload init` prints the spec the README shows, run-local loads the file with it,
    and `mapload verify` finds every item in the table (exit 0), then names an item deleted by hand
    (exit 1)."""
    import os
    import subprocess

    import boto3

    from tests.servers import mapload_serve

    blocks = fenced_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    (data,) = [body for lang, body in blocks if lang == "csv" and body.startswith("sku,price,stock")]
    (spec,) = [body for lang, body in blocks if lang == "json" and "PRODUCT#{sku}" in body]
    (walk,) = [body for lang, body in blocks if lang == "sh" and "/tmp/products.csv" in body]
    assert "mapload init" in walk and "mapload verify" in walk
    (tmp_path / "products.csv").write_text(data, encoding="utf-8")
    region = "eu-west-2"
    env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    env |= {"AWS_REGION": region, "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
    with mapload_serve(tmp_path / "mapload-serve.log") as endpoint:
        # The server is the fixture's (a free port); every other line runs as written.
        script = "\n".join(line for line in walk.splitlines() if "mapload serve" not in line)
        script = script.replace("http://127.0.0.1:5005", endpoint).replace("/tmp/", f"{tmp_path}/")
        done = subprocess.run(
            ["bash", "-ec", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
        )
        assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
        assert f"region {region}" in done.stderr
        assert json.loads((tmp_path / "products.spec.json").read_text()) == json.loads(spec)
        assert "3 compared: 3 as the file maps them" in done.stdout, done.stdout
        db = boto3.client(
            "dynamodb",
            region_name=region,
            endpoint_url=endpoint,
            aws_access_key_id="x",
            aws_secret_access_key="x",
        )
        table = next(name for name in db.list_tables()["TableNames"] if "StoreTable" in name)
        db.delete_item(TableName=table, Key={"pk": {"S": "PRODUCT#B-200"}, "sk": {"S": "DETAILS"}})
        verify = next(line for line in script.splitlines() if "mapload verify" in line)
        again = subprocess.run(
            ["bash", "-ec", "\n".join([script.splitlines()[0], verify])],  # the export line, then verify
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
    assert again.returncode == 1, again.stderr
    assert "missing   1" in again.stdout and "pk=PRODUCT#B-200" in again.stdout


def test_the_readme_is_a_front_door_that_links_every_docs_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 300
    linked = {target.partition("#")[0] for target in LINK.findall(split_fences(readme)[0])}
    assert {f"docs/{page.name}" for page in PAGES[1:]} <= linked


# -- the checks themselves catch what they are for ---------------------------------------------------

BROKEN = """# A page

## Start here

See [the input](INPUT.md), [a gone page](GONE.md), [here](#start-here), [nowhere](#nowhere),
[input, no such heading](INPUT.md#no-such-heading) and [the web](https://example.org/x).
Run `make demo`, `make no-such-target` and `mapload run-local FILE --report R --no-such-flag`.

```sh
make test ROWS=10
.venv/bin/mapload no-such-command --env dev
.venv/bin/mapload upload SRC s3://B/K --env dev --partial   # --comment-flag is not a flag
```

| field | default | meaning |
|---|---|---|
| `csv.header` | `true` | known |
| `dynamodb.attributes.<name>.type` | `S` | known |
| `csv.noSuchField` | `1` | unknown |

The report's `graph.danglingEdges` and `records.skiped`; `rejects.jsonl` is a file, not a field.
"""


def test_the_checks_report_a_broken_link_target_flag_and_field() -> None:
    page = ROOT / "docs" / "EXAMPLE.md"
    assert broken_links(page, BROKEN) == [
        "GONE.md: no such file",
        "#nowhere: no such heading on this page",
        "INPUT.md#no-such-heading: no heading #no-such-heading in docs/INPUT.md",
    ]
    assert unknown_make_targets(BROKEN, make_targets()) == ["no-such-target"]
    assert unknown_cli_names(BROKEN, cli_options()) == [
        "mapload run-local --no-such-flag: no such option",
        "mapload no-such-command: no such subcommand",
    ]
    assert unknown_input_fields(BROKEN, schema_properties(SCHEMA)) == ["csv.noSuchField"]
    properties = schema_properties(SCHEMA) | schema_properties(REPORT_SCHEMA)
    assert unknown_dotted_fields(BROKEN, top_level_fields(), properties) == [
        "csv.noSuchField",
        "records.skiped",
    ]
