"""What TensorFlow can run on here, and which devices a ``--device`` spec names.

This is not a parity check: it lists the logical devices TensorFlow sees (each GPU
with the name, compute capability and memory TensorFlow reports), how TensorFlow was
built (CUDA, cuDNN) and whether TF32 is on, so a user can tell why a GPU run was not
a GPU run. Device specs (``cpu``, ``gpu:0``, ``gpu`` = every GPU, ``all``) resolve to
TF device names here, so every command treats them alike.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ...errors import TfparityError
from .imports import import_tf

# TF32 exists on NVIDIA GPUs of compute capability 8.0 (Ampere) and newer.
TF32_MIN_CAPABILITY = (8, 0)


@dataclass
class DeviceInfo:
    """One logical device as TensorFlow reports it (``None``: TF does not tell)."""

    name: str  # e.g. "/device:GPU:0"
    device_type: str  # "CPU" or "GPU"
    description: str | None = None  # e.g. "NVIDIA H200"
    compute_capability: str | None = None  # e.g. "9.0"
    memory_limit_bytes: int | None = None  # what TF may allocate on it (GPUs only)
    tf32_capable: bool = False

    @property
    def short(self) -> str:
        """``cpu:0``, ``gpu:1``: the spelling ``--device`` takes."""
        return short_name(self.name)


@dataclass
class DevicesInfo:
    """Everything ``tfparity devices`` prints."""

    devices: list[DeviceInfo] = field(default_factory=list)
    tensorflow_version: str = ""
    is_cuda_build: bool = False
    cuda_version: str | None = None
    cudnn_version: str | None = None
    cuda_compute_capabilities: list[str] = field(default_factory=list)
    tf32_enabled: bool = False
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def short_name(tf_name: str) -> str:
    """``/device:GPU:0`` or ``/GPU:0`` -> ``gpu:0``."""
    kind, index = tf_name.split(":")[-2:]
    return f"{kind.rsplit('/', 1)[-1].lower()}:{index}"


def list_devices() -> DevicesInfo:
    """The logical devices, build facts and TF32 state of this TensorFlow."""
    tf = import_tf()
    build = dict(tf.sysconfig.get_build_info())
    info = DevicesInfo(
        tensorflow_version=tf.__version__,
        is_cuda_build=bool(build.get("is_cuda_build")),
        cuda_version=build.get("cuda_version"),
        cudnn_version=build.get("cudnn_version"),
        cuda_compute_capabilities=list(build.get("cuda_compute_capabilities") or []),
        tf32_enabled=bool(tf.config.experimental.tensor_float_32_execution_enabled()),
    )
    memory = _memory_limits()
    for logical in tf.config.list_logical_devices():
        info.devices.append(_describe(tf, logical, memory.get(short_name(logical.name))))
    if not any(d.device_type == "GPU" for d in info.devices):
        info.notes.append(_no_gpu_note(info.is_cuda_build))
    return info


def _describe(tf: Any, logical: Any, memory: int | None) -> DeviceInfo:
    device = DeviceInfo(name=logical.name, device_type=logical.device_type)
    if logical.device_type != "GPU":
        return device
    device.memory_limit_bytes = memory
    physical = _physical_gpu(tf, logical.name)
    details = tf.config.experimental.get_device_details(physical) if physical else {}
    device.description = details.get("device_name")
    capability = details.get("compute_capability")
    if capability:
        device.compute_capability = ".".join(str(x) for x in capability)
        device.tf32_capable = tuple(capability) >= TF32_MIN_CAPABILITY
    return device


def _physical_gpu(tf: Any, logical_name: str) -> Any | None:
    index = int(logical_name.rsplit(":", 1)[-1])
    gpus = tf.config.list_physical_devices("GPU")
    return gpus[index] if index < len(gpus) else None


def _memory_limits() -> dict[str, int]:
    """Bytes TF may allocate per GPU; only ``device_lib`` tells (a private module, so
    a TF that moves it gives no figure rather than an error)."""
    try:
        from tensorflow.python.client import device_lib

        return {
            short_name(d.name): int(d.memory_limit)
            for d in device_lib.list_local_devices()
            if d.device_type == "GPU"
        }
    except Exception:  # pragma: no cover - depends on TF internals
        return {}


def _no_gpu_note(is_cuda_build: bool) -> str:
    if is_cuda_build:
        return (
            "No GPU visible to TensorFlow. This TensorFlow is built with CUDA; on a machine "
            "with an NVIDIA GPU it also needs the CUDA libraries: pip install "
            "'tensorflow[and-cuda]'."
        )
    return "No GPU visible to TensorFlow (this TensorFlow is not built with CUDA)."


def resolve_devices(spec: str | None) -> list[str]:
    """TF device names for a ``--device`` spec; a GPU spec with no GPU is exit 2.

    ``cpu`` -> CPU:0; ``gpu:N``/``cpu:N`` -> that device; ``gpu`` -> every GPU;
    ``all`` -> CPU:0 and every GPU (CPU only when no GPU is visible).
    """
    tf = import_tf()
    cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
    gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
    text = (spec or "cpu").strip().lower()
    if text == "all":
        return cpus[:1] + gpus
    if text == "cpu":
        return cpus[:1]
    if text == "gpu":
        if not gpus:
            raise TfparityError(_no_gpu_message(text))
        return gpus
    kind, _, index = text.partition(":")
    if kind not in ("cpu", "gpu") or not index.isdigit():
        raise TfparityError(
            f"Unknown device '{spec}'. Use cpu, gpu (every GPU), gpu:N, cpu:N or all."
        )
    pool = gpus if kind == "gpu" else cpus
    if int(index) >= len(pool):
        if kind == "gpu":
            raise TfparityError(_no_gpu_message(text, len(pool)))
        raise TfparityError(f"There is no {text}; TensorFlow sees {len(pool)} CPU device(s).")
    return [pool[int(index)]]


def _no_gpu_message(spec: str, count: int = 0) -> str:
    seen = f"TensorFlow sees {count} GPU(s)" if count else "TensorFlow sees no GPU"
    return (
        f"--device {spec} asks for a GPU, but {seen}. Run `tfparity devices` to see what "
        "TensorFlow can use; on a machine with an NVIDIA GPU install the CUDA build: pip "
        "install 'tensorflow[and-cuda]'. Use --device cpu (or all) to run on the CPU."
    )


def tf32_capable(device: str) -> bool:
    """Whether ``device`` (a TF device name) is a GPU that can run TF32."""
    tf = import_tf()
    if short_name(device).split(":")[0] != "gpu":
        return False
    physical = _physical_gpu(tf, device)
    if physical is None:
        return False
    capability = tf.config.experimental.get_device_details(physical).get("compute_capability")
    return bool(capability) and tuple(capability) >= TF32_MIN_CAPABILITY
