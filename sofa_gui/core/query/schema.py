"""The documented tables and views of ``sofa-gui sql`` and the app's Query dock.

One description serves ``sofa-gui sql PATH --schema``, the Query dock's schema
pane and docs/sql.md, so they never disagree with what :mod:`.tables` registers
(tests/core/test_query.py checks every column listed here exists, in order).
Times are µs: ``*_us`` on the trace's own clock (the numbers ``--json`` prints),
``rel_start_us`` from the trace's start.
"""

from __future__ import annotations

#: table -> (what a row is, [(column, type, meaning)])
TABLES: dict[str, tuple[str, list[tuple[str, str, str]]]] = {
    "slices": ("one timed event (CPU op, Python frame, runtime call, kernel, copy...)", [
        ("id", "BIGINT", "slice index (what the timeline highlights)"),
        ("lane", "INTEGER", "lanes.id of its thread / stream"),
        ("name", "VARCHAR", "event name as recorded"),
        ("kind", "VARCHAR", "cpu_op, python, runtime, kernel, memcpy, memset, "
                            "communication, annotation, sync, network, other"),
        ("start_us", "DOUBLE", "start on the trace's clock"),
        ("dur_us", "DOUBLE", "duration"),
        ("end_us", "DOUBLE", "start_us + dur_us"),
        ("rel_start_us", "DOUBLE", "start from the trace's first event"),
        ("depth", "SMALLINT", "nesting row within its lane (0: top level)"),
        ("parent", "BIGINT", "id of the enclosing slice on its lane (NULL: top level)"),
        ("iteration", "INTEGER", "iterations.index of the iteration it starts in (NULL: none)"),
        ("rank", "INTEGER", "rank of its lane (-1: unknown)"),
        ("device", "SMALLINT", "GPU index (-1: host)"),
        ("stream", "BIGINT", "GPU stream or CPU thread id"),
        ("bytes", "BIGINT", "bytes moved by a copy (NULL: unknown)"),
        ("copy_kind", "VARCHAR", "h2d, d2h, d2d, p2p, other (NULL: not a copy)"),
        ("correlation", "BIGINT", "runtime call <-> kernel correlation id (NULL: none)"),
        ("args", "VARCHAR", "the event's arguments as JSON text (json_extract works on it)"),
    ]),
    "lanes": ("one thread, GPU stream, network link or counter group", [
        ("id", "INTEGER", "lane index (slices.lane)"),
        ("name", "VARCHAR", "lane title"),
        ("kind", "VARCHAR", "cpu, gpu, memcpy, network, counter"),
        ("rank", "INTEGER", "rank (-1: unknown)"),
        ("device", "SMALLINT", "GPU index (-1: host)"),
        ("stream", "BIGINT", "GPU stream (-1: none)"),
        ("process", "BIGINT", "process id (-1: none)"),
        ("thread", "BIGINT", "thread id (-1: none)"),
        ("group_name", "VARCHAR", "the heading it is drawn under (rank / process / device)"),
    ]),
    "iterations": ("one training step as the analysis found it", [
        ("index", "INTEGER", "0-based, as `analyze` numbers them"),
        ("label", "VARCHAR", "e.g. ProfilerStep#5 (NULL: none)"),
        ("start_us", "DOUBLE", "start on the trace's clock"),
        ("end_us", "DOUBLE", "end on the trace's clock"),
        ("duration_us", "DOUBLE", "end_us - start_us"),
        ("warmup", "BOOLEAN", "a leading iteration unlike the steady state"),
        ("rel_start_us", "DOUBLE", "start from the trace's first event"),
    ]),
    "flows": ("an arrow between two slices (CPU launch -> GPU kernel, fwd -> bwd...)", [
        ("from_slice", "BIGINT", "slices.id it starts at"),
        ("to_slice", "BIGINT", "slices.id it points to"),
        ("kind", "VARCHAR", "launch or other"),
    ]),
    "counters": ("one counter sample (memory, utilization, clocks...)", [
        ("lane", "INTEGER", "lanes.id of the counter lane that draws it"),
        ("name", "VARCHAR", "series name"),
        ("unit", "VARCHAR", "series unit"),
        ("ts_us", "DOUBLE", "sample time on the trace's clock"),
        ("value", "DOUBLE", "sample value"),
    ]),
    "findings": ("one bottleneck the advisor names (as `analyze` lists them)", [
        ("rank", "INTEGER", "rank its evidence is on (-1: several or unknown)"),
        ("id", "VARCHAR", "rule id"),
        ("title", "VARCHAR", "one-line title"),
        ("share", "DOUBLE", "fraction of steady-state iteration time its fixes could remove"),
        ("covers", "DOUBLE", "fraction of steady-state iteration time a hypothesis is about "
                             "(faster compute saves part of it; NULL: its fixes remove it all)"),
        ("speedup", "DOUBLE", "estimated speed-up if removed (NULL: one-off work)"),
        ("speedup_is_lower_bound", "BOOLEAN", "the estimate is a lower bound (the trace "
                                              "cannot size all the fix removes)"),
        ("confidence", "DOUBLE", "0..1"),
    ]),
}

#: view -> (what it holds, SQL body). Every view has the columns of ``slices``.
VIEWS: dict[str, tuple[str, str]] = {
    "kernels": ("GPU kernels", "SELECT * FROM slices WHERE kind = 'kernel'"),
    "ops": ("CPU operators (aten::..., framework ops)",
            "SELECT * FROM slices WHERE kind = 'cpu_op'"),
    "copies": ("memory copies (copy_kind says the direction)",
               "SELECT * FROM slices WHERE kind = 'memcpy'"),
    "collectives": ("communication (NCCL / RCCL / Gloo collectives, send / recv)",
                    "SELECT * FROM slices WHERE kind = 'communication'"),
}

#: SQL functions the app adds: name -> meaning.
FUNCTIONS = {
    "short_name(name)": "the grouping name of `sofa-gui stats` (C++ demangled, template "
                        "and argument lists folded)",
}

#: (title, query): shown in the Query dock's examples menu and in docs/sql.md.
EXAMPLES: list[tuple[str, str]] = [
    ("Top 10 kernels by total time",
     "SELECT short_name(name) AS kernel, count(*) AS n, sum(dur_us) AS total_us\n"
     "FROM kernels GROUP BY 1 ORDER BY total_us DESC LIMIT 10"),
    ("Top 10 kernels in iteration 3",
     "SELECT short_name(name) AS kernel, count(*) AS n, sum(dur_us) AS total_us\n"
     "FROM kernels WHERE iteration = 3 GROUP BY 1 ORDER BY total_us DESC LIMIT 10"),
    ("Iteration durations",
     "SELECT index, label, duration_us, warmup FROM iterations ORDER BY index"),
    ("Slowest 20 CPU ops (slice ids highlight on the timeline)",
     "SELECT id, name, dur_us, iteration FROM ops ORDER BY dur_us DESC LIMIT 20"),
    ("Kernels launched by each CPU op",
     "SELECT p.name AS op, count(*) AS kernels, sum(k.dur_us) AS kernel_us\n"
     "FROM flows f JOIN slices r ON r.id = f.from_slice JOIN kernels k ON k.id = f.to_slice\n"
     "JOIN slices p ON p.id = r.parent\n"
     "GROUP BY 1 ORDER BY kernel_us DESC LIMIT 20"),
    ("Copy bandwidth by direction",
     "SELECT copy_kind, count(*) AS n, sum(bytes) / sum(dur_us) / 1e3 AS gb_per_s\n"
     "FROM copies WHERE bytes IS NOT NULL GROUP BY 1 ORDER BY n DESC"),
    ("Busy time per lane",
     "SELECT l.name, l.kind, sum(s.dur_us) AS top_level_us\n"
     "FROM slices s JOIN lanes l ON l.id = s.lane WHERE s.depth = 0\n"
     "GROUP BY 1, 2 ORDER BY top_level_us DESC"),
    ("Findings", "SELECT * FROM findings ORDER BY share DESC"),
]


def schema_lines() -> list[str]:
    """The schema as text (``sofa-gui sql PATH --schema``)."""
    out: list[str] = []
    for table, (what, cols) in TABLES.items():
        out.append(f"{table}: {what}")
        width = max(len(c) for c, _, _ in cols)
        out += [f"  {c.ljust(width)}  {t.ljust(8)}  {doc}" for c, t, doc in cols]
        out.append("")
    out.append("views (columns of slices):")
    out += [f"  {v.ljust(11)}  {what}" for v, (what, _) in VIEWS.items()]
    out += ["", "functions:"]
    out += [f"  {f}  {doc}" for f, doc in FUNCTIONS.items()]
    return out
