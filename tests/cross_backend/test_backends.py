"""``tfparity backends``: one .keras model on TensorFlow, JAX and torch, float64 referee.

Backend processes are slow to start, so the two real runs (a clean model through the
API, one with a layer that is wrong on JAX only through the CLI) are made once per
module and shared; the judge's rule and the refusals are tested without processes.
"""

from __future__ import annotations

import numpy as np
import pytest

from tfparity.adapters.keras_backends import launch
from tfparity.cli import main
from tfparity.cross_backend.judge import BackendOutputs, check_backends
from tfparity.errors import TfparityError
from tfparity.report.backends import render_backends

EXAMPLE = "tfparity.examples.keras_backends_model"
LAYERS = ["embedding", "dense_1", "residual", "norm", "dense_2"]
ALL = ["tensorflow", "jax", "torch"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from tfparity.examples.keras_backends_model import save

    root = tmp_path_factory.mktemp("backends")
    return {"clean": save(root / "clean.keras"), "faulty": save(root / "faulty.keras", fault="jax")}


@pytest.fixture(scope="module")
def clean(files, tfparity_backend_workers):
    import tfparity

    # with gradients: their clean test shares this run (test_backends_gradients.py has
    # the fault); on the session's warm processes, which the other files' runs reuse
    return tfparity.backends(
        str(files["clean"]), imports=[EXAMPLE], gradients=True, workers=tfparity_backend_workers
    )


@pytest.fixture(scope="module")
def faulty(files, tmp_path_factory, backends_cli):
    """The faulty model through the CLI, on TensorFlow (the referee's process, which
    runs TensorFlow's float32 too) and JAX, one after the other (``--jobs 1``), in the
    session's warm processes. Exit code, text, JSON, and the HTML and plot (read by the
    test that asks for them)."""
    root = tmp_path_factory.mktemp("faulty")
    argv = [str(files["faulty"]), "--backends", "tensorflow,jax", "--import", EXAMPLE]
    argv += ["--jobs", "1", "--html", str(root / "r.html"), "--plot", str(root / "r.png")]
    return (*backends_cli(*argv), root)


def test_a_clean_model_passes_on_every_backend(clean):
    assert clean.passed
    d = clean.details
    assert d["backends"] == ALL
    assert d["referee"] == {"backend": "tensorflow", "dtype": "float64"}
    assert [row["layer"] for row in d["layers"]] == LAYERS  # topological order
    forward = [c for c in clean.comparisons if ":grad:" not in c.name]
    assert len(forward) == len(LAYERS) * len(ALL)
    assert all(c.judge == "referee" and c.passed for c in clean.comparisons)
    assert clean.first_divergence is None and d["first_divergence"] is None
    assert {b: f["dtype_policy"] for b, f in d["precision"].items()} == dict.fromkeys(
        ALL, "float32"
    )
    assert "jax_default_matmul_precision" in d["precision"]["jax"]
    # float32 rounding on every backend, far below the ceiling
    worst = max(c["relative_rmse"] or 0 for r in d["layers"] for c in r["backends"].values())
    assert worst < 1e-5


def test_assert_backends_reuses_the_warm_processes_and_names_the_backend(
    files, clean, tfparity_backend_workers
):
    """After the clean run, the pytest assertion on the faulty file runs in the same
    (warm) processes: none is started; its message leads with the backend and layer."""
    import tfparity

    started = tfparity_backend_workers.started()
    two = {"imports": [EXAMPLE], "backends": ["tensorflow", "jax"]}
    tfparity.assert_backends(str(files["clean"]), **two)  # the plugin lends its workers
    with pytest.raises(AssertionError) as failed:
        tfparity.assert_backends(str(files["faulty"]), **two, workers=tfparity_backend_workers)
    lines = str(failed.value).splitlines()
    assert lines[0].startswith("FAIL backends: backend jax parts from tensorflow")
    assert "first divergence: backend jax, layer residual (one)" in lines
    assert any(line.startswith("residual ") for line in lines)  # the table's rows around it
    assert lines[-1].startswith("full report:")
    assert failed.value.reports[0].details["first_divergence"]["backend"] == "jax"
    assert tfparity_backend_workers.started() == started


def test_a_warm_process_is_not_reused_without_the_model_s_imports(
    files, clean, tfparity_backend_workers
):
    """A process that imported the custom layer's module is not lent to a run that
    does not import it: that run fails as in a fresh process, naming the layer."""
    import tfparity

    started = tfparity_backend_workers.started()
    with pytest.raises(TfparityError, match="ScaledResidual") as refused:
        tfparity.backends(str(files["clean"]), backends=["jax"], workers=tfparity_backend_workers)
    assert "the jax backend could not run the model" in str(refused.value)
    # two new processes, neither importing the module: JAX's and the referee's (TensorFlow)
    assert tfparity_backend_workers.started() == started + 2


# Reverse topological order: per layer, the gradient w.r.t. its output, then its weights.
GRADIENT_ROWS = [
    "dense_2:output",
    "dense_2/kernel",
    "dense_2/bias",
    "norm:output",
    "norm/gamma",
    "norm/beta",
    "residual:output",
    "residual/alpha",
    "dense_1:output",
    "dense_1/kernel",
    "dense_1/bias",
    "embedding:output",
    "embedding/embeddings",
]


def test_a_clean_model_passes_with_gradients_on_every_backend(clean):
    chosen = ALL
    g = clean.details["gradients"]
    assert clean.passed and clean.first_divergence is None
    assert [row["gradient"] for row in g["rows"]] == GRADIENT_ROWS
    assert g["rows"][-1]["layer"] == "embedding"  # the embeddings' gradient, last
    assert g["first_divergence"] is None
    assert "default_rng(0)" in g["scalar"]
    grads = [c for c in clean.comparisons if ":grad:" in c.name]
    assert len(grads) == len(GRADIENT_ROWS) * len(chosen)
    assert all(c.judge == "referee" and c.passed for c in grads)
    # float32 rounding, far below the ceiling, and not exactly zero (really computed)
    errors = [c["relative_rmse"] for r in g["rows"] for c in r["backends"].values()]
    assert max(errors) < 1e-5 and min(errors) > 0


def test_a_layer_wrong_on_jax_only_fails_naming_jax_and_that_layer(faulty):
    code, text, data, _ = faulty
    assert code == 1
    assert "first divergence: backend jax, layer residual (one)" in text
    assert "FAIL backends: backend jax parts from tensorflow and the float64 referee" in text
    assert data["passed"] is False
    assert data["first_divergence"]["layer"] == "residual"
    assert data["details"]["first_divergence"]["backend"] == "jax"
    assert data["details"]["first_divergence"]["kind"] == "one"
    verdicts = {c["name"]: c["passed"] for c in data["comparisons"]}
    assert verdicts["jax:dense_1"] and not verdicts["jax:residual"]  # localised, not earlier
    assert all(v for name, v in verdicts.items() if not name.startswith("jax:"))
    # a custom layer holding none of the known backend-specific ops: no hint
    assert data["details"]["first_divergence"]["hints"] == []


def test_the_faulty_run_writes_html_and_plot_naming_jax_and_the_layer(faulty):
    """The same verdict with --jobs 1 as the parallel runs the docs show, and the HTML
    and plot of a real run."""
    _, _, _, root = faulty
    page = (root / "r.html").read_text()
    assert "first divergence:</b> backend jax, layer residual (one)" in page
    assert '<tr class="fail"><td class="name">residual</td>' in page
    assert '<tr class="ok"><td class="name">dense_1</td>' in page
    assert "data:image/png;base64," in page
    assert (root / "r.png").read_bytes()[:4] == b"\x89PNG"


def _exit_code(argv):
    """main's return code, or argparse's exit code (a bad option value exits in parsing)."""
    try:
        return main(argv)
    except SystemExit as e:
        return e.code


def _hide_jax(monkeypatch):
    real = launch.installed
    monkeypatch.setattr(launch, "installed", lambda b: b != "jax" and real(b))


def test_backends_jax_without_jax_exits_2_naming_the_pip_command(files, monkeypatch, capsys):
    _hide_jax(monkeypatch)
    assert main(["backends", str(files["clean"]), "--backends", "jax"]) == 2
    err = capsys.readouterr().err
    assert "backend jax is not installed: pip install 'tfparity[jax]'" in err
    assert "Traceback" not in err


def test_a_missing_backend_not_asked_for_is_skipped_with_its_pip_command(monkeypatch):
    _hide_jax(monkeypatch)
    chosen, notes = launch.choose_backends(None)
    assert chosen == ("tensorflow", "torch")
    assert notes == ["backend jax skipped: not installed (pip install 'tfparity[jax]')"]
    assert launch.choose_backends(["torch", "tensorflow"]) == (("torch", "tensorflow"), [])


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--backends", "jax,mxnet"], "unknown backend(s) mxnet"),
        (["--pt", "minilm"], "does not take --pt"),
        (["--ceiling", "nan"], "not a finite number"),
    ],
)
def test_bad_usage_exits_2(files, argv, says, capsys):
    assert _exit_code(["backends", str(files["clean"]), *argv]) == 2
    assert says in capsys.readouterr().err


def test_a_file_that_is_not_keras_exits_2(tmp_path, capsys):
    bad = tmp_path / "model.keras"
    bad.write_text("not a zip")
    assert main(["backends", str(bad)]) == 2
    assert "is not a Keras 3 .keras file" in capsys.readouterr().err


def test_keras_rounds_float64_to_float32_on_jax_and_torch_only(clean):
    """Why only TensorFlow referees: the probe each process runs (Keras 3.15: torch's
    float64 matmul and mean, JAX's mean and tanh come out at float32)."""
    short = {b: f["float64_shortfalls"] for b, f in clean.details["precision"].items()}
    assert short["tensorflow"] == []
    assert "matmul" in short["torch"] and short["jax"]


def _worker_refusal(files, tmp_path, argv):
    """The worker run here (Keras on TensorFlow) on the clean file, and the parent's
    reading of what it wrote."""
    from tfparity.adapters.keras_backends import worker

    given, out = tmp_path / "inputs.npz", tmp_path / "out.npz"
    np.savez(given, input_0=np.zeros((1, 4), np.int32))
    code = worker.main([str(files["clean"]), "--inputs", str(given), "--out", str(out), *argv])
    with pytest.raises(TfparityError) as refused:
        launch.read_run("torch", out)
    return code, str(refused.value)


def test_a_referee_backend_that_rounds_float64_to_float32_is_refused(files, tmp_path, monkeypatch):
    from tfparity.adapters.keras_backends import worker

    monkeypatch.setattr(worker, "float64_shortfalls", lambda keras: ["matmul", "mean"])
    argv = ["--import", EXAMPLE, "--precision", "float32", "--precision", "float64"]
    code, message = _worker_refusal(files, tmp_path, argv)
    assert code == 2
    assert "computes matmul, mean at float32" in message
    assert "--referee-backend tensorflow" in message


def test_a_custom_layer_not_imported_exits_2_naming_the_backend(files, tmp_path, monkeypatch):
    """As in a fresh process that did not import the module registering the layer."""
    import keras

    registered = keras.saving.get_custom_objects()
    for name in [n for n in registered if n.startswith("tfparity_examples>")]:
        monkeypatch.delitem(registered, name)
    code, message = _worker_refusal(files, tmp_path, ["--precision", "float32"])
    assert code == 2
    assert "the torch backend could not run the model" in message
    assert "ScaledResidual" in message


# The judge alone, on made-up outputs: numpy only, no process.

RNG = np.random.default_rng(0)
TRUTH = {"a": RNG.standard_normal((2, 8, 16)), "b": RNG.standard_normal((2, 8, 16))}


def _float32(truth, scale=1.0):
    """A float32 run of ``truth`` with its own rounding (and ``scale`` times larger)."""
    noise = RNG.standard_normal(truth.shape) * 1e-7 * np.abs(truth)
    return ((truth + noise) * scale).astype(np.float32)


def _judged(runs):
    return check_backends(BackendOutputs("made-up", runs, TRUTH, "torch"))


def test_judge_passes_float32_rounding_and_names_the_one_backend_that_parts():
    clean = {b: {k: _float32(t) for k, t in TRUTH.items()} for b in ALL}
    assert _judged(clean).passed
    skewed = {**clean, "jax": {"a": clean["jax"]["a"], "b": _float32(TRUTH["b"], 1.001)}}
    report = _judged(skewed)
    f = report.details["first_divergence"]
    assert not report.passed
    assert (f["backend"], f["layer"], f["kind"], f["backends"]) == ("jax", "b", "one", ["jax"])


def test_judge_with_two_backends_does_not_let_the_faulty_one_widen_its_own_bound():
    runs = {
        "tensorflow": {k: _float32(t) for k, t in TRUTH.items()},
        "jax": {k: _float32(t, 1.0001) for k, t in TRUTH.items()},
    }
    f = _judged(runs).details["first_divergence"]
    assert (f["backend"], f["layer"], f["backends"]) == ("jax", "a", ["jax"])


def test_judge_tells_backends_that_agree_with_each_other_but_not_the_referee():
    shared = {k: _float32(t, 1.001) for k, t in TRUTH.items()}
    report = _judged({b: dict(shared) for b in ALL})
    f = report.details["first_divergence"]
    assert not report.passed
    assert (f["layer"], f["kind"], f["backends"], f["backend"]) == ("a", "all", ALL, None)
    assert "every backend (tensorflow, jax, torch) parts from the float64 referee" in f["text"]
    assert "the referee's backend (torch)" in f["text"]  # as _judged names it
    assert "first divergence: every backend, layer a (all)" in render_backends(report)
