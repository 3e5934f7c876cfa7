"""What an environment has deployed now, for the app's stateful-resource check (stacks/stateful.py).

    .venv/bin/python scripts/deployed_state.py dev .cache/deployed-dev.json

Reads each of the environment's stacks' templates from CloudFormation (the credentials and region
of the CLI, as `cdk deploy` uses them) and writes their stateful resources to the file; a stack
that does not exist adds nothing. `make deploy` runs it before `cdk deploy` and passes the file
as `-c mapload-deployed=FILE`, so a settings change that would replace or remove a table, a
bucket, the Neptune cluster or the data key of the deployed environment is refused at synth.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from stacks.stage import DATA_STACK_ID, GRAPH_STACK_ID, LOADER_STACK_ID, stage_id  # noqa: E402
from stacks.stateful import stateful_resources  # noqa: E402


def deployed_templates(cloudformation: Any, env: str) -> dict[str, dict[str, Any]]:
    """Stack name -> its deployed template, for each of the environment's stacks that exists."""
    templates: dict[str, dict[str, Any]] = {}
    for stack_id in (DATA_STACK_ID, GRAPH_STACK_ID, LOADER_STACK_ID):
        name = f"{stage_id(env)}-{stack_id}"
        try:
            body = cloudformation.get_template(StackName=name, TemplateStage="Original")["TemplateBody"]
        except cloudformation.exceptions.ClientError as error:
            if "does not exist" in str(error):
                continue
            raise
        templates[name] = json.loads(body) if isinstance(body, str) else dict(body)
    return templates


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: deployed_state.py ENV OUTPUT_FILE", file=sys.stderr)
        return 2
    env, output = argv
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        templates = deployed_templates(boto3.client("cloudformation"), env)
    except (BotoCoreError, ClientError) as error:
        print(f"mapload: cannot read what {stage_id(env)} has deployed: {error}", file=sys.stderr)
        return 2
    state = {"stacks": {name: stateful_resources(template) for name, template in templates.items()}}
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text(json.dumps(state, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    held = sum(len(resources) for resources in state["stacks"].values())
    print(
        f"mapload: {stage_id(env)} has {len(templates)} stacks deployed, {held} stateful resources",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
