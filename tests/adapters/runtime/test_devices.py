"""`tfparity devices`, device specs, and GPU requests on a machine without a GPU."""

from __future__ import annotations

import json

import pytest

from tfparity.adapters.runtime.devices import list_devices, resolve_devices, short_name
from tfparity.cli import main
from tfparity.errors import TfparityError


def _gpus() -> int:
    import tensorflow as tf

    return len(tf.config.list_logical_devices("GPU"))


no_gpu = pytest.mark.skipif("_gpus() > 0", reason="a GPU is visible")


def test_listing_has_cpu_build_facts_and_tf32():
    info = list_devices()
    assert info.devices[0].short == "cpu:0" and info.devices[0].device_type == "CPU"
    assert info.tensorflow_version and isinstance(info.tf32_enabled, bool)
    data = json.loads(json.dumps(info.to_dict()))
    assert data["devices"][0]["name"].endswith("CPU:0")
    assert {"cuda_version", "cudnn_version", "is_cuda_build"} <= set(data)


def test_short_names():
    assert short_name("/device:GPU:1") == "gpu:1"
    assert short_name("/job:localhost/replica:0/task:0/device:CPU:0") == "cpu:0"


def test_cpu_specs_resolve():
    assert [short_name(d) for d in resolve_devices("cpu")] == ["cpu:0"]
    assert [short_name(d) for d in resolve_devices("CPU:0")] == ["cpu:0"]
    assert short_name(resolve_devices("all")[0]) == "cpu:0"
    with pytest.raises(TfparityError, match="Unknown device 'tpu'"):
        resolve_devices("tpu")


@no_gpu
def test_all_means_cpu_only_without_a_gpu():
    assert [short_name(d) for d in resolve_devices("all")] == ["cpu:0"]


@no_gpu
@pytest.mark.parametrize("spec", ["gpu", "gpu:0"])
def test_gpu_without_a_gpu_is_a_clear_usage_error(spec):
    with pytest.raises(TfparityError, match=f"--device {spec} asks for a GPU.*sees no GPU"):
        resolve_devices(spec)


@no_gpu
@pytest.mark.parametrize("command", ["check", "modes"])
def test_cli_device_gpu_exits_2(capsys, command):
    assert main([command, "tiny:bert", "--device", "gpu"]) == 2
    err = capsys.readouterr().err
    assert "asks for a GPU" in err and "tfparity devices" in err and "Traceback" not in err


def test_cli_devices_json_to_stdout(capsys):
    assert main(["devices", "--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["devices"][0]["device_type"] == "CPU"


def test_cli_devices_text(capsys):
    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    assert "cpu:0" in out and "TF32 execution:" in out and "tensorflow " in out
