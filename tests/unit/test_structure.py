"""The package's shape: the dependency direction, no import cycle, classes composed rather
than chained, and modules of a readable size (a long one is reported unless the allow-list
says why it is one module).

Imports are read from the source with ``ast`` (including those under ``TYPE_CHECKING``, which
state a dependency as much as any other), so a violation fails here before it can hide
behind an import order that happens to work.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the folders at the repository's top and the import package each one is (``tickwork``
#: holds the other three, linked in: ``tickwork/scheduler`` -> ``../scheduler``)
FOLDERS = {
    "triggers": "tickwork.triggers",
    "scheduler": "tickwork.scheduler",
    "workers": "tickwork.workers",
    "tickwork": "tickwork",
}
#: the layers, bottom up: what each may import of ours (besides itself); "tickwork" is the
#: top layer (the facade, the CLI, the dashboard, the API, the integrations)
ALLOWED = {
    "triggers": set(),
    "scheduler": {"triggers"},
    "workers": {"scheduler", "triggers"},
    "tickwork": {"scheduler", "triggers", "workers"},
}
MAX_LINES = 400  # past it, a module asks whether it is one job
#: modules past ``MAX_LINES`` that are one job all the same, each with why
LONG_MODULES: dict[str, str] = {
    "tickwork.scheduler.app": "one job, the facade users import: every producer verb "
    "(enqueue, enqueue_many, emit, cancel, get, abort, preview, result, and the task and "
    "periodic decorators with their typed overloads) is a docstring users read through "
    "help(App) and a delegation to the producer, the registry or a service, and the App "
    "holds the services (app.schedules, app.queues, app.poison, app.batches, app.workers, "
    "app.audit, app.runs, app.limits). The work lives elsewhere: the task options in one "
    "TypedDict (scheduler/model/task_keywords.py), producing in scheduler/producing/, each "
    "service in its own module. What stays is what must move together: use_backend "
    "re-points the settings, clock and builder at once. Splitting the verbs would only put "
    "the signatures users read into a second class they must also find; the task verb's "
    "docstring names every option on purpose (test_task_keywords checks it)",
}


def _layer(module: str) -> str:
    """The layer a module of ours sits in: triggers, scheduler, workers or tickwork."""
    parts = module.split(".")
    return (
        parts[1]
        if len(parts) > 1 and parts[1] in ("triggers", "scheduler", "workers")
        else "tickwork"
    )


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            relative = path.relative_to(ROOT / folder)
            if relative.parts[0] in FOLDERS:  # tickwork's links to the other folders
                continue
            parts = (*package.split("."), *relative.with_suffix("").parts)
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _imports(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    """The modules of ours that ``name`` imports, each resolved to the most specific one."""
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            candidates = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for candidate in candidates:
            while candidate and candidate not in modules:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                targets.add(candidate)
                break
    return targets


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, name, modules) for name, path in modules.items()}


def test_each_package_imports_only_what_sits_below_it() -> None:
    wrong = [
        f"{module} imports {target}"
        for module, targets in _graph().items()
        for target in targets
        if (layer := _layer(target)) != _layer(module) and layer not in ALLOWED[_layer(module)]
    ]
    assert wrong == []


def test_there_is_no_import_cycle() -> None:
    graph = _graph()
    # a package's __init__ re-exports its modules; an edge into it from one of its own
    # modules would be a cycle through the package, so keep those edges too
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    assert cycles == []


def test_a_long_module_says_why_it_is_one_module() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in _modules().items()}
    long = {name for name, size in sizes.items() if size > MAX_LINES}
    assert long - LONG_MODULES.keys() == set(), "split by meaning, or say why in LONG_MODULES"
    assert LONG_MODULES.keys() - long == set(), "no longer long: take it off the allow-list"


def _bases_of_ours(modules: dict[str, Path]) -> dict[str, list[str]]:
    """Each class of ours -> the names of its bases that are classes of ours."""
    ours: set[str] = set()
    trees = {name: ast.parse(path.read_text()) for name, path in modules.items()}
    for tree in trees.values():
        ours |= {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    found: dict[str, list[str]] = {}
    for module, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                names = [
                    b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases
                ]
                found[f"{module}.{node.name}"] = [n for n in names if n in ours]
    return found


def test_no_class_is_built_from_two_of_ours() -> None:
    """A class that grows gets collaborators, not mixins."""
    mixed = {name for name, bases in _bases_of_ours(_modules()).items() if len(bases) > 1}
    assert mixed == set()


def test_the_app_is_composed_of_services() -> None:
    """``App`` inherits nothing of ours: its operator verbs are on services it holds."""
    from tickwork.scheduler.app import App

    assert App.__mro__ == (App, object)


#: roles with fewer implementations than backends: one serves several, built over another
#: role of theirs (the number of implementations, and why)
SHARED_ROLES = {
    "Changes": 3,  # PostgreSQL's NOTIFY, Redis's pub/sub; SQLite and Cassandra: their ledger
}


def test_backends_are_composed_not_chained() -> None:
    """Every backend is its class, ``Backend``, ``ABC`` and ``object``; every role has
    one implementation per backend, each its class, the role, ``ABC`` and ``object``."""
    from tickwork.scheduler.backends import codec, roles
    from tickwork.scheduler.backends.base import Backend
    from tickwork.scheduler.backends.cassandra import CassandraBackend
    from tickwork.scheduler.backends.codec import CodedBackend
    from tickwork.scheduler.backends.postgres import PostgresBackend
    from tickwork.scheduler.backends.redis import RedisBackend
    from tickwork.scheduler.backends.sqlite import SQLiteBackend

    backends = (SQLiteBackend, PostgresBackend, RedisBackend, CassandraBackend)
    assert [len(backend.__mro__) for backend in backends] == [4, 4, 4, 4]
    stores = set(Backend.__subclasses__()) - {CodedBackend}  # the codec wraps any of them
    assert stores == set(backends) and len(CodedBackend.__mro__) == 4
    for role_name in roles.__all__:
        role = getattr(roles, role_name)
        implementations = [i for i in role.__subclasses__() if i.__module__ != codec.__name__]
        if role_name in SHARED_ROLES:
            assert len(implementations) == SHARED_ROLES[role_name], (role_name, implementations)
        else:
            assert len(implementations) == len(backends), (role_name, implementations)
        assert all(len(i.__mro__) == 4 for i in implementations), role_name
        assert len(role.__abstractmethods__) <= 12, role_name


#: the areas of ``scheduler/`` (its sub-packages and top-level modules), bottom up: an
#: area imports only areas of the tiers below its own. The model at the bottom (messages,
#: tasks, the registry, and what a task declares: retry policies, limits, event names),
#: above the backends' records and roles it converts to; then what runs and limits read;
#: producing (building a message, a chain's next step); workflows below schedules (a
#: schedule may start or cancel a graph; a workflow never needs a schedule); events above
#: both (an event may start a workflow); the operator's views; the app on top.
AREA_TIERS: list[set[str]] = [
    {"errors", "clock", "ids"},
    {"backends"},
    {"model"},
    {"runs", "limits"},
    {"hooks", "settings"},
    {"encryption"},
    {"producing"},
    {"parts"},
    {"workflows"},
    {"schedules"},
    {"events"},
    {"views"},
    {"producer"},
    {"app"},
    {"loading", "spark"},
]


def _area(module: str) -> str | None:
    """The area of ``scheduler/`` a module sits in (None outside ``scheduler/``)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "scheduler" else None


def test_the_areas_of_the_scheduler_import_downward_only() -> None:
    tier = {area: index for index, areas in enumerate(AREA_TIERS) for area in areas}
    upward = []
    for module, targets in _graph().items():
        area = _area(module)
        if area is None:
            continue
        assert area in tier, f"{module}: give the area {area!r} its tier in AREA_TIERS"
        for target in targets:
            other = _area(target)
            if other is not None and other != area and tier[other] >= tier[area]:
                upward.append(f"{module} -> {target}")
    assert sorted(upward) == []


#: what a constructor takes at most, besides ``self``: a worker component that needs more
#: takes the ``WorkerContext`` (``workers/context.py``), a backend's store its URL options
#: record (``RedisOptions``, ``CassandraOptions``); otherwise it is two jobs
MAX_PARAMETERS = 6
#: the worker module that wires the components together, the one that sees ``App``
WORKER_WIRING = "tickwork.workers.worker"


def _constructors(layer: str) -> dict[str, int]:
    """How many parameters each ``__init__`` written in ``layer`` takes (``self`` aside).
    A dataclass without one of its own is a record of values, not a component."""
    found = {}
    for module, path in _modules().items():
        if _layer(module) != layer:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    arguments = item.args
                    count = len(arguments.posonlyargs) + len(arguments.args) - 1
                    count += len(arguments.kwonlyargs) + bool(arguments.vararg)
                    found[f"{module}.{node.name}"] = count
    return found


def _importers_of_app(layer: str) -> set[str]:
    """The modules of ``layer`` that import the ``App`` class by name."""
    found = set()
    for module, path in _modules().items():
        if _layer(module) != layer:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.ImportFrom)
                and (node.module or "").startswith("tickwork")
                and any(alias.name == "App" for alias in node.names)
            ):
                found.add(module)
    return found


@pytest.mark.parametrize("layer", ["triggers", "scheduler", "workers", "tickwork"])
def test_no_constructor_takes_more_than_six_parameters(layer: str) -> None:
    wide = {name: count for name, count in _constructors(layer).items() if count > MAX_PARAMETERS}
    assert wide == {}


def test_only_the_worker_wiring_sees_the_app() -> None:
    """Components get ``WorkerApp`` (``workers/app_needs.py``), the part of the app a
    worker uses; ``workers/worker.py`` alone builds the context from the ``App``."""
    assert _importers_of_app("workers") <= {WORKER_WIRING}


def test_the_api_does_not_import_the_dashboard() -> None:
    """``tickwork/api/`` (the HTTP API, users, roles, guards, hardening) sits below the
    dashboard's pages, which mount it."""
    graph = _graph()
    upward = [
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.startswith("tickwork.api")
        for target in targets
        if target.startswith("tickwork.dashboard")
    ]
    assert upward == []
    assert "tickwork.api.app" in graph["tickwork.dashboard.pages"]


def test_the_checker_sees_imports() -> None:
    """Guards the tests above against passing because they read nothing."""
    graph = _graph()
    planning = graph["tickwork.scheduler.producing.planning"]
    assert any(_layer(t) == "triggers" for t in planning)
    sqlite = graph["tickwork.scheduler.backends.sqlite.backend"]
    assert "tickwork.scheduler.backends.base" in sqlite
    assert any(_layer(t) == "scheduler" for t in graph["tickwork.workers.settling.settler"])
    assert _layer("tickwork.cli.main") == "tickwork" and _layer("tickwork") == "tickwork"
    assert len(graph) > 60
    constructors = _constructors("workers")
    assert constructors["tickwork.workers.intake.consumer.Consumer"] == MAX_PARAMETERS
    assert constructors["tickwork.workers.worker.Worker"] == 3  # app, config, clock
    shards = _constructors("scheduler")["tickwork.scheduler.backends.redis.shards.RedisShards"]
    assert shards == 5  # client, options, cluster, description, loop_wire
    assert WORKER_WIRING in _importers_of_app("workers")
    assert "tickwork.scheduler.loading" in _importers_of_app("scheduler")
    assert _area("tickwork.scheduler.model.message") == "model"
    assert "tickwork.scheduler.model.retry" in graph["tickwork.scheduler.model.registry"]


def test_everything_is_imported_through_tickwork() -> None:
    """The folders ``scheduler/``, ``workers/`` and ``triggers/`` are ``tickwork.scheduler``
    and so on (the only import package the wheel installs); a bare ``import scheduler``
    works in a checkout only, and would load a second copy of the module."""
    bare = []
    for folder in (*FOLDERS, "tests", "bench", "examples"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.relative_to(ROOT / folder).parts[0] in FOLDERS:
                continue  # tickwork's links to the other folders
            for node in ast.walk(ast.parse(path.read_text())):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom) and not node.level
                    else []
                )
                bare += [
                    f"{path.relative_to(ROOT)}: {name}"
                    for name in names
                    if name.split(".")[0] in ("scheduler", "workers", "triggers")
                ]
    assert bare == []
