"""hypothesis strategies for initiatives, scopes and DAGs."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from imm_action.plan.dag import kahn_order, transitive_closures

SEGMENTS = ["src", "SRC", "lib", "a", "b", "docs", "x.py", "A.PY", ".", "..", "*", "**", "?",
            "[ab]", "{c,d}", "!n", "a*", "", " ", "Ünï"]  # fmt: skip


@st.composite
def scope_entries(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.text(max_size=12))
    body = "/".join(draw(st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=3)))
    prefix = draw(st.sampled_from(["", "", "", "./", "././", "/", " ", "\\"]))
    suffix = draw(st.sampled_from(["", "", "", "/", "\\x", " \t"]))
    return prefix + body + suffix


scope_lists = st.lists(scope_entries(), min_size=0, max_size=3)
clean_scope_lists = st.lists(
    st.lists(st.sampled_from(["src", "lib", "docs", "a", "b", "c"]), min_size=1, max_size=3).map(
        "/".join
    ),
    min_size=1,
    max_size=3,
)


@st.composite
def dags(draw: st.DrawFn, max_tasks: int = 10) -> dict[str, list[str]]:
    """Task id -> direct dependencies, acyclic, ids not in topological order."""
    size = draw(st.integers(1, max_tasks))
    names = draw(st.permutations([f"t{index:02d}" for index in range(size)]))
    graph: dict[str, list[str]] = {}
    for index, name in enumerate(names):
        earlier = names[:index]
        graph[name] = sorted(draw(st.sets(st.sampled_from(earlier), max_size=3))) if earlier else []
    return graph


@st.composite
def schedule_inputs(draw: st.DrawFn, scopes: Any = scope_lists) -> list[dict[str, Any]]:
    """Children as the reference's projection receives them: in a topological order."""
    graph = draw(dags())
    order = kahn_order(graph)
    closures = transitive_closures(order, graph)
    use_closure = draw(st.booleans())
    return [
        {
            "task_id": task,
            "blocked_by": closures[task] if use_closure else graph[task],
            "scope_hint": draw(scopes),
        }
        for task in order
    ]
