"""The OpenAPI schema as strict as the checks behind it, so that a client generated from it, or a
fuzzer, sends what the server takes and nothing it refuses.

What FastAPI's schema cannot say on its own is completed here, once, when the schema is built:

- run and projection bodies are the RunSpec (`backend.deps.SpecBody` reads them as JSON objects,
  so that a bad field is our 422 naming it), with `algorithm` one of the registered names; a run
  body may instead be an ExternalRun, and external runs' rounds, ends and imports have theirs
  (`dpfl.external`), each event an object with a registered `kind`;
- an `accountant` parameter is one of the registered accountants (a plugin may add one, so the
  names are read when the schema is built);
- no string may hold NUL (`backend.deps.refuse_nul` refuses it everywhere: Postgres cannot store it).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from dpfl.algorithms import registered_algorithms
from dpfl.external import ExternalImport, ExternalRun, ReportedRound, RunEnd
from dpfl.privacy.accountants import registered_accountants
from dpfl.privacy.events import event_kinds
from dpfl.spec import RunSpec

__all__ = ["NO_NUL", "complete_schema"]

NO_NUL = "^[^\\u0000]*$"
"""The pattern of every string the API takes: anything but NUL."""


def complete_schema(app: FastAPI) -> None:
    """Makes `app.openapi()` return its schema completed as the module docstring says."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = generate()
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        spec = RunSpec.model_json_schema(ref_template="#/components/schemas/{model}")
        spec["properties"]["algorithm"]["enum"] = registered_algorithms()
        components.update(spec.pop("$defs", {}) | {"RunSpec": spec})
        for model in (ExternalRun, ReportedRound, RunEnd, ExternalImport):
            external = model.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(external.pop("$defs", {}) | {model.__name__: external})
        parties = components["ReportedRound"]["properties"]["events"]
        parties["additionalProperties"] = False  # a party name outside the pattern is refused
        for events in parties["patternProperties"].values():
            events["items"] |= {"properties": {"kind": {"enum": event_kinds()}}, "required": ["kind"]}
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                for parameter in operation.get("parameters", []):
                    if parameter["name"] == "accountant":
                        # "": the run's own, as when it is left out
                        parameter["schema"] = {"type": "string", "enum": ["", *registered_accountants()]}
        # what requests carry: parameters, bodies and the components they name (responses hold none)
        _refuse_nul(components)
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                _refuse_nul([operation.get("parameters", []), operation.get("requestBody", {})])
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _refuse_nul(node: Any) -> None:
    """Gives every free string schema under `node` the pattern `NO_NUL`."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            free = not any(k in item for k in ("pattern", "enum", "const", "format"))
            if item.get("type") == "string" and free:
                item["pattern"] = NO_NUL
            stack.extend(v for k, v in item.items() if k not in ("examples", "example", "default"))
        elif isinstance(item, list):
            stack.extend(item)
