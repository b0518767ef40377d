"""tfparity's pytest plugin, registered through the ``pytest11`` entry point: installing
tfparity is enough, no conftest needed.

Fixtures:
- ``tfparity_model(spec="minilm")``: a loaded TFModel, cached for the session (a model
  costs seconds to load; tests must not change its weights);
- ``tfparity_backend_workers``: the session's warm Keras backend processes, for
  ``tfparity.backends(..., workers=...)`` (``assert_backends`` takes them by itself);
- ``tfparity_batch(model="tiny:bert", *, texts=None, n=4, seq_len=16, seed=0,
  padding_side=None)``: one seeded Batch (random ids of mixed lengths, or ``texts``).

Options:
- ``--tfparity-device DEVICE``: run the assertion helpers' TF models there (cpu,
  gpu:N, gpu);
- ``--tfparity-json DIR``: each test that calls an assertion helper writes its reports
  to ``DIR/<node id, sanitized>.json``, passed or failed.

This module imports neither TensorFlow nor torch: pytest loads it in every session
of every project where tfparity is installed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .assertions import HelperContext, helper_context


@dataclass
class _Session:
    """Per-session state, kept in ``config.stash`` (not in module globals)."""

    device: str | None
    json_dir: Path | None
    models: dict[str, Any] = field(default_factory=dict)
    json_names: dict[str, str] = field(default_factory=dict)  # file name -> node id
    workers: Any = None  # BackendWorkers, made when first asked for

    def backend_workers(self) -> Any:
        if self.workers is None:
            from .adapters.keras_backends.workers import BackendWorkers

            self.workers = BackendWorkers()
        return self.workers

    def close(self) -> None:
        if self.workers is not None:
            self.workers.close()

    def load(self, spec: str) -> Any:
        if spec not in self.models:
            from .api import load_model  # keras-hub:<SPEC> gives a KerasHubModel

            self.models[spec] = load_model(spec)
        return self.models[spec]


_SESSION = pytest.StashKey[_Session]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tfparity", "tfparity parity checks")
    group.addoption(
        "--tfparity-device",
        metavar="DEVICE",
        help="run tfparity's assertion helpers on this TensorFlow device (cpu, gpu:N, gpu)",
    )
    group.addoption(
        "--tfparity-json",
        metavar="DIR",
        help="write each tfparity assertion's reports to DIR/<test node id>.json",
    )


def pytest_configure(config: pytest.Config) -> None:
    json_dir = config.getoption("tfparity_json", None)
    if json_dir and Path(json_dir).exists() and not Path(json_dir).is_dir():
        # Found at start-up, not after the first test: a per-test error there would
        # replace that test's real failure and its parity report.
        raise pytest.UsageError(
            f"--tfparity-json {json_dir} is a file; it must name a directory (made if "
            "missing) for one JSON report per test."
        )
    config.stash[_SESSION] = _Session(
        device=config.getoption("tfparity_device", None),
        json_dir=Path(json_dir) if json_dir else None,
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is not None:
        session.close()  # the warm backend processes end with the session


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = config.stash.get(_SESSION, None)
    if session is None or not (session.device or session.json_dir):
        return []
    return [f"tfparity: device={session.device or 'default'}, json={session.json_dir or '-'}"]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Lend the assertion helpers this session's device and model cache for the test,
    and write the reports they made to --tfparity-json, whatever the outcome."""
    session = item.config.stash[_SESSION]
    name = path = None
    if session.json_dir is not None:  # named now: a failure message says where it goes
        name = json_name(item.nodeid, session.json_names)
        path = (session.json_dir / f"{name}.json").resolve()
    context = HelperContext(
        device=session.device,
        load=session.load,
        json_path=path,
        backend_workers=session.backend_workers,
    )
    with helper_context(context):
        yield
    if path is not None and context.reports:
        from .report.jsonio import write_json

        path.parent.mkdir(parents=True, exist_ok=True)
        session.json_names.setdefault(name, item.nodeid)
        write_json(context.reports, path)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A failed assertion helper's line in pytest's short summary is its headline alone
    (``FAILED path::test - layer 1 intermediate diverges ...``), without pytest's
    ``AssertionError:`` before it: at 80 columns, after a test's node id, those 16
    characters were the ones that held the layer and component (the line ended
    ``AssertionError: l...``). The failure's own block still names the error."""
    outcome = yield
    error = call.excinfo.value if call.excinfo is not None else None
    if not isinstance(error, AssertionError) or not isinstance(
        getattr(error, "reports", None), list
    ):
        return
    crash = getattr(outcome.get_result().longrepr, "reprcrash", None)
    if crash is not None:
        crash.message = str(error).split("\n", 1)[0]


def json_name(nodeid: str, taken: Mapping[str, str] | None = None) -> str:
    """A file name for a node id: ``tests/test_x.py::test_y`` -> ``tests_test_x.py__test_y``;
    ``tests/test_x.py::test_y[a/b]`` -> ``tests_test_x.py__test_y_a_b_-<8 hex digits>``.

    The readable part alone is not unique: ``[a/b]``, ``[a_b]`` and ``[a b]`` all give
    ``a_b``, and the last test to write replaced the others' reports. So a parametrised
    id (where any text can appear) gets a hash of the whole id, and so does any id whose
    readable name ``taken`` (name -> node id, this session's) already gives another test.
    """
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", nodeid).strip(".")[:150] or "test"
    taken = taken or {}
    if "[" not in nodeid and taken.get(readable, nodeid) == nodeid:
        return readable
    digest = hashlib.sha1(nodeid.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{readable}-{digest}"


@pytest.fixture(scope="session")
def tfparity_model(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``tfparity_model("tiny:bert")`` -> the session's TFModel for that spec."""
    session = request.config.stash[_SESSION]

    def get(spec: str = "minilm") -> Any:
        return session.load(spec)

    return get


@pytest.fixture(scope="session")
def tfparity_backend_workers(request: pytest.FixtureRequest) -> Any:
    """The session's warm Keras backend processes (a :class:`tfparity.BackendWorkers`):
    pass it as ``tfparity.backends(..., workers=...)``; ``assert_backends`` uses it
    by itself. Each backend's imports are then paid once per session."""
    return request.config.stash[_SESSION].backend_workers()


@pytest.fixture
def tfparity_batch(tfparity_model: Callable[..., Any]) -> Callable[..., Any]:
    """``tfparity_batch("tiny:bert", n=4, seq_len=16, seed=0)`` -> one seeded Batch."""
    from .inputs import InputOptions

    def make(
        model: Any = "tiny:bert",
        *,
        texts: list[str] | None = None,
        n: int = 4,
        seq_len: int = 16,
        seed: int = 0,
        padding_side: str | None = None,
    ) -> Any:
        from .api import load_model, make_batches

        tf_model = tfparity_model(model) if isinstance(model, str) else load_model(model)
        if texts is not None:
            options = InputOptions(
                texts=tuple(texts), batch_size=max(1, len(texts)), padding_side=padding_side
            )
        else:
            options = InputOptions(
                random=n, seq_len=seq_len, batch_size=n, seed=seed, padding_side=padding_side
            )
        return make_batches(tf_model, options)[0]

    return make
