"""GitHub's published GraphQL schema (vendored, see tests/vendor/github_graphql_schema/README.md)
plus the commented overlay, built with graphql-core, and GitHub's validation of a document
against it: the spec's rules and GitHub's own pagination limits."""

from __future__ import annotations

import functools
import gzip
from pathlib import Path
from typing import Any

from graphql import (
    FieldNode,
    GraphQLError,
    GraphQLSchema,
    ValidationRule,
    build_schema,
    get_named_type,
    parse,
    specified_rules,
    validate,
)
from graphql.error import GraphQLSyntaxError

VERSION = "15.26.1"  # npm @octokit/graphql-schema
FOLDER = Path(__file__).resolve().parents[1] / "vendor" / "github_graphql_schema"
PAGE_LIMIT = 100


@functools.cache
def github_schema() -> GraphQLSchema:
    with gzip.open(FOLDER / "schema.graphql.gz", "rt", encoding="utf-8") as file:
        published = file.read()
    overlay = (FOLDER / "overlay.graphql").read_text(encoding="utf-8")
    # GitHub's published SDL breaks two rules graphql-core enforces on schemas (a field defined
    # twice in EnterpriseOwnerInfo; deprecated implementations of non-deprecated interface
    # fields). GitHub serves it as it is, so it is taken as it is: the schema's own checks are
    # skipped, a document's validation against it is not.
    schema = build_schema(published + "\n" + overlay, assume_valid_sdl=True)
    schema._validation_errors = []  # see above
    return schema


class PaginationBoundaries(ValidationRule):
    """GitHub's rule: every connection is read with `first` or `last`, at most 100 records."""

    def enter_field(self, node: FieldNode, *_: Any) -> None:
        definition = self.context.get_field_def()
        if definition is None:
            return
        if not get_named_type(definition.type).name.endswith("Connection"):
            return
        arguments = {argument.name.value: argument.value for argument in node.arguments or ()}
        if "first" not in arguments and "last" not in arguments:
            self.report_error(
                GraphQLError(
                    "You must provide a `first` or `last` value to properly paginate the "
                    f"`{node.name.value}` connection.",
                    node,
                )
            )
            return
        for name in ("first", "last"):
            value = getattr(arguments.get(name), "value", None)
            if isinstance(value, str) and value.isdigit() and int(value) > PAGE_LIMIT:
                self.report_error(
                    GraphQLError(
                        f"Requesting {value} records on the `{node.name.value}` connection "
                        f"exceeds the `{name}` limit of {PAGE_LIMIT} records.",
                        node,
                    )
                )


def document_errors(document: str) -> list[dict[str, Any]]:
    """What GitHub answers, under `errors`, for a document it refuses; empty when it is valid."""
    try:
        parsed = parse(document)
    except GraphQLSyntaxError as error:
        return [error.formatted]
    found = validate(github_schema(), parsed, [*specified_rules, PaginationBoundaries])
    return [error.formatted for error in found]
