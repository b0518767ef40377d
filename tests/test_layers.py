"""The layers of docs/design.md, held to the imports: a module imports only its own layer
and the ones below it, and only adapters/ imports a framework, except where the design
page names the exception. Imports inside functions count too. No framework is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tfparity"

# Bottom to top, as in docs/design.md's diagram (a prefix names a module or a package).
LAYERS = (
    ("_version", "errors", "compare", "trace", "inputs", "results", "golden", "validation"),
    ("architectures",),
    ("adapters",),
    ("checks", "report"),
    ("orchestration",),
    ("api", "assertions", "sweep", "cross_backend"),
    ("", "__main__", "cli", "commands", "pytest_plugin", "keras", "testing", "examples"),
)

# Upward imports the design page names, each with its reason there.
UPWARD: set[tuple[str, str]] = set()  # none: a config fault asks the model to rebuild
FRAMEWORKS = ("tensorflow", "tf_keras", "keras", "keras_hub", "torch", "transformers")
# Framework imports outside adapters/ that the design page names.
FRAMEWORK_USERS = {
    ("sweep.ray_engine", "tensorflow"),  # cap each Ray actor's threads before loading
    ("sweep.ray_engine", "torch"),
    ("architectures.keras_hub_layouts", "keras"),  # a fault: swap a backbone's GELU
    ("architectures.generic", "transformers"),  # transformers' own tables of TF classes
    ("examples.keras_bert", "keras"),  # a user's own Keras 3 model: the docs' example
    ("examples.keras_backends_model", "keras"),  # custom layers, imported per backend
    ("examples.keras_hub_logits_fault", "keras"),  # a torch-only fault, imported per backend
    ("examples.keras_hub_backends", "keras"),  # a rotary layer skewed on one backend
    ("examples.keras_hub_backends", "keras_hub"),
    ("examples.keras_hub_gradient_fault", "keras"),  # a backward fault on one backend
    ("examples.keras_hub_gradient_fault", "keras_hub"),
    ("examples.own_head", "tensorflow"),  # a head model of one's own on both sides: the
    ("examples.own_head", "tf_keras"),  # docs' example (imports inside its functions)
    ("examples.own_head", "torch"),
}


def modules() -> dict[str, Path]:
    """tfparity's modules by their name under tfparity ("" is the package itself)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> tuple[set[str], set[str]]:
    """What ``name`` imports: tfparity's modules by their name under tfparity, and the
    others by their top-level name (``tensorflow``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".") if package else []
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(["tfparity", *base, *([module] if module else [])])
            targets += [f"{module}.{a.name}" for a in node.names]  # a submodule or a name
    own, others = set(), set()
    for target in targets:
        if target != "tfparity" and not target.startswith("tfparity."):
            others.add(target.split(".")[0])
            continue
        inner = target.removeprefix("tfparity").removeprefix(".")
        while inner not in known:
            inner = inner.rpartition(".")[0]
        own.add(inner)
    return own - {name}, others


def layer(name: str) -> int:
    """The layer of a tfparity module: the last one whose prefix names it."""
    ranks = [
        rank
        for rank, prefixes in enumerate(LAYERS)
        for prefix in prefixes
        if name == prefix or (prefix and name.startswith(prefix + "."))
    ]
    assert ranks, f"tfparity.{name} has no layer in LAYERS (nor in docs/design.md?)"
    return ranks[-1]


def test_no_module_imports_a_layer_above_its_own_unless_the_design_says_why():
    known = modules()
    upward = {
        (name, target)
        for name, path in known.items()
        for target in imports(name, path, known)[0]
        if layer(target) > layer(name)
    }
    assert upward == UPWARD, "docs/design.md's layers and their named exceptions"


def test_only_adapters_import_a_framework_unless_the_design_says_why():
    known = modules()
    users = {
        (name, target)
        for name, path in known.items()
        if not name.startswith("adapters")
        for target in imports(name, path, known)[1]
        if target in FRAMEWORKS
    }
    assert users == FRAMEWORK_USERS, "docs/design.md names each framework import outside adapters/"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while not group or group[-1] != v:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def is_face(group: list[str]) -> bool:
    """A package's __init__ re-exporting its own submodule, which imports a sibling
    through the package: the package's face, not a cycle between two modules' jobs."""
    return len(group) == 2 and any(a.startswith(b + ".") for a in group for b in group)


def test_no_import_cycle_between_the_packages_own_modules():
    known = modules()
    graph = {name: imports(name, path, known)[0] for name, path in known.items()}
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert [g for g in cycles(graph) if not is_face(g)] == []


# Where the TF side and the reference are used through their declared interfaces.
INTERFACE_USERS = ("checks", "orchestration", "api", "assertions", "sweep")
SIDE_NAMES = {"model", "tf_model", "pt_model", "pt", "reference", "runner", "runner_model"}


def test_no_capability_probe_on_a_side_where_the_interfaces_are_used():
    """``hasattr(tf_model, "x")`` or ``getattr(model, "x", None)`` would mean a side
    answers by convention, not by its declared interface (adapters/interfaces.py)."""
    probes = []
    for name, path in modules().items():
        if not any(name == u or name.startswith(u + ".") for u in INTERFACE_USERS):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            if node.func.id not in ("hasattr", "getattr") or not node.args:
                continue
            target = node.args[0]
            if isinstance(target, ast.Name) and target.id in SIDE_NAMES:
                probes.append(f"{name}:{node.lineno} {node.func.id}({target.id}, ...)")
    assert probes == []


TESTS = Path(__file__).resolve().parent


def test_no_module_is_over_600_lines():
    """A module that long holds more than one job; split it by concern. Test files too:
    split by topic, a module-scoped model kept with the tests that share it."""
    files = [*modules().values(), *TESTS.rglob("*.py")]
    long = {str(p.relative_to(TESTS.parent)): len(p.read_text().splitlines()) for p in files}
    assert {n: lines for n, lines in long.items() if lines > 600} == {}


# Inside checks/: the sub-packages of the checks that build on another sit above it
# (generate localises in the cross-check's forward pass), the flat modules and any other
# sub-package below them all. A module imports its own rank or one below.
CHECK_RANKS = {
    "checks.crosscheck": 1,
    "checks.generation": 2,
    "checks.gradients": 2,
    "checks.runtimes": 2,  # against a source, each run is cross-checked
}


def check_rank(name: str) -> int | None:
    """A module's rank inside checks/ (None: outside checks/)."""
    if name != "checks" and not name.startswith("checks."):
        return None
    package = ".".join(name.split(".")[:2])
    return CHECK_RANKS.get(package, 0)


def test_no_arrow_runs_back_up_inside_checks():
    known = modules()
    assert check_rank("checks.crosscheck.decoder") == 1 and check_rank("checks.embeds") == 0
    upward = {
        (name, target)
        for name, path in known.items()
        if check_rank(name) is not None
        for target in imports(name, path, known)[0]
        if check_rank(target) is not None and check_rank(target) > check_rank(name)
    }
    assert upward == set()


# The sides' own packages: only adapters/ (and the layers above checks/ that assemble a
# run) may import them; checks/ talk to a side through adapters.interfaces alone.
SIDE_PACKAGES = tuple(
    f"adapters.{side}" for side in ("hf_tf", "keras_hub", "reference", "user", "exported")
)
SIDE_BASES = {"TFSideBase", "ReferenceBase"}


def concrete_sides(known: dict[str, Path]) -> set[str]:
    """The classes under adapters/ that derive, directly or not, from a side's base
    class (``TFModel``, ``PTModel``, ``StoredReference``, ...): found, not listed, so a
    new side is held to the rules the day it is written."""
    bases: dict[str, set[str]] = {}
    for name, path in known.items():
        if not name.startswith("adapters"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                parents = {
                    b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases
                }
                bases.setdefault(node.name, set()).update(parents)
    found = set(SIDE_BASES)
    while grown := {c for c, parents in bases.items() if parents & found} - found:
        found |= grown
    return found - SIDE_BASES


def isinstance_on(source: str, classes: set[str]) -> list[str]:
    """``isinstance(x, C)`` (or a tuple holding ``C``, or ``module.C``) for each ``C`` of
    ``classes`` in ``source``, as ``line: C``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance"):
            continue
        if len(node.args) != 2:
            continue
        kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
        for kind in kinds:
            named = kind.id if isinstance(kind, ast.Name) else getattr(kind, "attr", None)
            if named in classes:
                found.append(f"{node.lineno}: {named}")
    return found


def test_no_isinstance_on_a_concrete_side_outside_adapters():
    """A caller tells a side or a reference from anything else by its base class
    (``TFSideBase``, ``ReferenceBase``); a decision that needs the concrete class is
    the side's own, behind the interface (``side.bound(pt)``, ``gradients_refusal()``)."""
    known = modules()
    concrete = concrete_sides(known)
    assert {"TFModel", "PTModel", "StoredReference", "OwnReference", "UserModel"} <= concrete
    assert "KerasHubModel" in concrete and "TFSideBase" not in concrete
    planted = "def f(x):\n    return isinstance(x, (int, PTModel)) or isinstance(x, side.TFModel)\n"
    assert isinstance_on(planted, concrete) == ["2: PTModel", "2: TFModel"]
    assert isinstance_on("isinstance(x, TFSideBase)", concrete) == []
    found = {
        name: hits
        for name, path in known.items()
        if not name.startswith("adapters") and (hits := isinstance_on(path.read_text(), concrete))
    }
    assert found == {}


def side_imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of a side's own package that ``name`` imports."""
    own = imports(name, path, known)[0]
    return {t for t in own if any(t == p or t.startswith(p + ".") for p in SIDE_PACKAGES)}


def test_checks_import_no_concrete_side(tmp_path):
    """checks/ judge any side through adapters.interfaces: an import of hf_tf, keras_hub,
    reference, user or exported would tie a check to one side (and its framework)."""
    known = modules()
    planted = tmp_path / "planted.py"
    planted.write_text("def f():\n    from ..adapters.hf_tf.tf_model import TFModel\n")
    assert side_imports("checks.planted", planted, known) == {"adapters.hf_tf.tf_model"}
    planted.write_text("from ..adapters.interfaces.sides import TFSide\n")
    assert side_imports("checks.planted", planted, known) == set()
    found = {
        name: targets
        for name, path in known.items()
        if name == "checks" or name.startswith("checks.")
        if (targets := side_imports(name, path, known))
    }
    assert found == {}
