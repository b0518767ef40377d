"""``tfparity backends``'s HTML and plot reports, the first divergence's hints and the
``--jobs`` scheduling, on made-up backend outputs (numpy only, no backend process; the
real runs' HTML and plot are checked in tests/cross_backend/test_backends.py, which shares
its processes)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tfparity.adapters.keras_backends import launch
from tfparity.cli import main
from tfparity.cross_backend.hints import layer_hints
from tfparity.cross_backend.judge import BackendOutputs, check_backends
from tfparity.report.backends import render_backends
from tfparity.report.html import render_html
from tfparity.report.plot import backend_series, png_bytes

BACKENDS = ["tensorflow", "jax", "torch"]
LAYERS = ["embedding", "attention", "dense"]
RNG = np.random.default_rng(0)
TRUTH = {name: RNG.standard_normal((2, 8, 16)) for name in LAYERS}
DENSE = {"class": "Dense", "bases": [], "dtype_policy": "float32", "config_keys": ["units"]}
ATTENTION = {
    "class": "CachedMultiHeadAttention",
    "bases": ["MultiHeadAttention"],
    "dtype_policy": "float32",
    "config_keys": ["num_heads"],
}
PRECISION = {
    "tensorflow": {"dtype_policy": "float32", "devices": ["cpu"]},
    "jax": {"dtype_policy": "float32", "flash_attention": True, "devices": ["cpu:0"]},
    "torch": {"dtype_policy": "float32", "allow_tf32": False, "devices": ["cpu"]},
}


def _float32(truth: np.ndarray, scale: float = 1.0) -> np.ndarray:
    return (truth * scale).astype(np.float32)


def _outputs(faulty: str | None = None, facts=None, everyone: bool = False) -> BackendOutputs:
    """Every backend at float32 rounding; ``faulty`` (or ``everyone``) 0.1% off from
    the attention layer on."""
    runs = {}
    for b in BACKENDS:
        off = everyone or b == faulty
        runs[b] = {
            n: _float32(t, 1.001 if off and n != "embedding" else 1.0) for n, t in TRUTH.items()
        }
    per_layer = facts or {"embedding": DENSE, "attention": ATTENTION, "dense": DENSE}
    return BackendOutputs(
        model="made-up",
        float32=runs,
        truth=TRUTH,
        referee_backend="tensorflow",
        precision=PRECISION,
        layer_facts=dict.fromkeys(BACKENDS, per_layer),
    )


@pytest.fixture(scope="module")
def failing():
    return check_backends(_outputs("jax"))


@pytest.fixture(scope="module")
def passing():
    return check_backends(_outputs())


def test_an_attention_layer_failing_on_one_backend_gets_the_flash_path_hint(failing):
    f = failing.details["first_divergence"]
    assert not failing.passed
    assert (f["backend"], f["layer"], f["kind"]) == ("jax", "attention", "one")
    assert len(f["hints"]) == 1
    assert "dot_product_attention" in f["hints"][0] and "flash" in f["hints"][0]
    assert "jax flash_attention True, torch flash_attention default" in f["hints"][0]
    text = render_backends(failing)
    assert "first divergence: backend jax, layer attention (one)" in text
    assert "  hint: layer attention (CachedMultiHeadAttention) computes attention" in text
    assert "precision jax: dtype_policy float32, flash_attention True" in text


def test_a_clean_run_has_no_first_divergence_and_no_hint(passing):
    assert passing.passed and passing.details["first_divergence"] is None
    assert "hint:" not in render_backends(passing)


def test_every_backend_parting_alike_gets_no_backend_specific_hint():
    """Tie order and a flash path are each backend's own: they cannot make all three
    part alike, so only a half-precision policy would be hinted."""
    f = check_backends(_outputs(everyone=True)).details["first_divergence"]
    assert f["kind"] == "all" and f["layer"] == "attention"
    assert f["hints"] == []


def test_a_half_precision_policy_on_one_backend_is_named_with_that_backend():
    half = {**DENSE, "dtype_policy": "mixed_bfloat16"}
    facts = {
        "tensorflow": {"dense": DENSE},
        "jax": {"dense": half},
        "torch": {"dense": DENSE},
    }
    hints = layer_hints("dense", ["jax"], facts, PRECISION)
    assert len(hints) == 1
    assert "half precision (mixed_bfloat16 on jax)" in hints[0]
    assert layer_hints("dense", ["jax"], {"jax": {"dense": DENSE}}, PRECISION) == []


@pytest.mark.parametrize(
    "facts",
    [
        {"class": "MoERouter", "bases": [], "config_keys": ["num_experts"]},
        {"class": "Gate", "bases": [], "config_keys": ["top_k", "units"]},
    ],
)
def test_a_router_or_a_top_k_config_gets_the_tie_order_hint(facts):
    hints = layer_hints("gate/0", ["torch"], {"torch": {"gate": facts}}, {})
    assert any("top_k or argsort" in h and "tied scores" in h for h in hints)


def test_the_worker_records_class_bases_and_policy_of_a_real_keras_model():
    """What a backend's process records of its layers, on a real Keras 3 model built
    here on TensorFlow, is what the hints read."""
    os.environ.pop("TF_USE_LEGACY_KERAS", None)
    keras = pytest.importorskip("keras")
    if not keras.__version__.startswith("3") or keras.backend.backend() != "tensorflow":
        pytest.skip("needs Keras 3 on TensorFlow in this process")
    from tfparity.adapters.keras_backends.worker import layer_facts

    x = keras.Input((4, 8))
    a = keras.layers.MultiHeadAttention(2, 4, name="attn")(x, x)
    y = keras.layers.Dense(3, dtype="mixed_bfloat16", name="half")(a)
    facts = layer_facts(keras.Model(x, y))
    assert [n for n in facts if "/" not in n] == ["attn", "half"]  # no InputLayer
    assert facts["attn/query"]["class"] == "EinsumDense"  # sublayers by their tap's path
    assert facts["attn"]["class"] == "MultiHeadAttention" and facts["attn"]["bases"] == []
    assert facts["half"]["dtype_policy"] == "mixed_bfloat16"
    assert "units" in facts["half"]["config_keys"]
    recorded = {"jax": facts}
    assert any("computes attention" in h for h in layer_hints("attn", ["jax"], recorded, {}))
    assert any("half precision" in h for h in layer_hints("half", ["jax"], recorded, {}))
    assert layer_hints("attn", ["jax"], recorded, {}, shared=True) == []


# ----------------------------------------------------------------------------- HTML, plot


def test_the_html_report_has_the_layer_by_backend_table_and_the_hint(failing):
    page = render_html([failing], {0: b"\x89PNG fake"})
    assert "<th>jax rmse/RMS</th><th>jax bound</th>" in page
    assert '<tr class="fail"><td class="name">attention</td>' in page
    assert '<tr class="ok"><td class="name">embedding</td>' in page
    assert "first divergence:</b> backend jax, layer attention (one)" in page
    assert "<b>hint:</b> layer attention (CachedMultiHeadAttention)" in page
    assert "FAIL backends: backend jax parts from tensorflow, torch" in page
    assert "data:image/png;base64," in page
    assert "allow_tf32 False, devices cpu<" in page  # the precision facts, as the text has them
    assert "hidden_states[None]" not in page


def test_the_html_report_of_a_clean_run_passes(passing):
    page = render_html([passing])
    assert 'class="fail"' not in page.split("</h1>", 1)[1].split("<p>PASS")[0]
    assert "PASS backends: tensorflow, jax, torch agree" in page


def test_the_plot_series_has_each_backend_by_layer_and_the_ceiling(failing):
    s = backend_series(failing)
    assert s is not None and s.layers == LAYERS and s.ceiling == 1e-4
    assert s.failed["jax"] == [False, True, True] and not any(s.failed["torch"])
    assert s.relative["jax"][1] > 1e-4 > s.relative["torch"][1]
    assert s.first_divergence == 1 and "backend jax, layer attention" in s.divergence_label
    assert png_bytes([failing])[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_cli_writes_html_and_plot_for_backends(tmp_path, monkeypatch, failing, capsys):
    """The options reach the writers (the run itself faked: see the module)."""
    import tfparity.cross_backend as cross_backend

    asked = {}

    def fake(model, **kwargs):
        asked.update(kwargs)
        return failing

    monkeypatch.setattr(cross_backend, "backends", fake)
    html, png, js = tmp_path / "r.html", tmp_path / "r.png", tmp_path / "r.json"
    argv = ["backends", "m.keras", "--jobs", "1", "--html", str(html), "--plot", str(png)]
    assert main([*argv, "--json", str(js)]) == 1
    assert asked["jobs"] == 1
    assert "hint: layer attention" in capsys.readouterr().out
    assert "first divergence:</b> backend jax" in html.read_text()
    assert png.read_bytes()[:4] == b"\x89PNG"
    hints = json.loads(js.read_text())["details"]["first_divergence"]["hints"]
    assert hints and "dot_product_attention" in hints[0]


@pytest.mark.parametrize("jobs", ["0", "two"])
def test_jobs_below_one_exits_2(jobs, capsys):
    with pytest.raises(SystemExit) as e:
        main(["backends", "m.keras", "--jobs", jobs])
    assert e.value.code == 2
    assert "--jobs takes a whole number of at least 1" in capsys.readouterr().err


# ----------------------------------------------------------------------------- --jobs


class FakeProcess:
    """A process that is running from its start until it is collected."""

    running: list[str] = []
    most = 0

    def __init__(self, name: str) -> None:
        self.name, self.done = name, False
        FakeProcess.running.append(name)
        FakeProcess.most = max(FakeProcess.most, len(FakeProcess.running))

    def finish(self) -> None:
        self.done = True
        FakeProcess.running.remove(self.name)

    def poll(self):
        return 0 if self.done else None

    def kill(self) -> None:
        self.finish()

    def communicate(self):
        return "", ""


def _schedule(jobs: int, fail: str | None = None):
    FakeProcess.running, FakeProcess.most = [], 0
    log = []

    def start(name):
        log.append(f"start {name}")
        return FakeProcess(name)

    def collect(name, proc):
        proc.finish()
        log.append(f"end {name}")
        if name == fail:
            raise launch.TfparityError(f"{name} failed")
        return launch.BackendRun(name)

    runs = launch.scheduled(BACKENDS, jobs, start, collect)
    return runs, log


@pytest.mark.parametrize(("jobs", "most"), [(1, 1), (2, 2), (3, 3), (8, 3)])
def test_at_most_jobs_processes_run_at_once(jobs, most):
    runs, log = _schedule(jobs)
    assert list(runs) == BACKENDS and FakeProcess.most == most
    if jobs == 1:  # one after another
        assert log == [f"{w} {b}" for b in BACKENDS for w in ("start", "end")]


def test_a_failure_ends_the_processes_still_running():
    with pytest.raises(launch.TfparityError, match="tensorflow failed"):
        _schedule(2, fail="tensorflow")
    assert FakeProcess.running == []  # jax was started, then killed
