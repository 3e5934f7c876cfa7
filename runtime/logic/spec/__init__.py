"""The execution input (version 1): its models, parsing, checks and normalized form.

Its two entry points are here: `parse_spec` (an input into the JobSpec, errors worded naming the
field) and `spec_to_json` (the normalized form Plan hands the Workers, which the plan id hashes),
both from parse.py. Everything else is imported from the module it lives in:
- inputs.py: `JobSpec` and one model per format, the fields every format has, `json_schema`;
- dynamodb.py: the DynamoDB target, one model per writeMode with what that mode does;
- graph.py: the graph target (statements, vertices and edges) and the loader's options;
- csv_options.py: the `csv` options; fields.py: the common field types (templates, `Model`);
- checks.py: the checks that need the data or the deployment (columns, memory, buckets).
"""

from logic.spec.parse import parse_spec, spec_to_json

__all__ = ["parse_spec", "spec_to_json"]
