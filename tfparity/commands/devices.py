"""``tfparity devices``: what TensorFlow can run on here (not a parity check)."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import TfparityError
from .common import EXIT_PASS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "devices",
        help="list the devices TensorFlow sees, its CUDA/cuDNN build and TF32 state",
        description="List TensorFlow's logical devices (CPU, each GPU with its name and "
        "memory where TensorFlow tells), the CUDA and cuDNN it was built with, and "
        "whether TF32 is enabled.",
    )
    p.add_argument("--json", metavar="PATH", help="write the listing as JSON to PATH ('-': stdout)")
    p.set_defaults(func=_run_devices)


def _run_devices(args: argparse.Namespace) -> int:
    from ..adapters.runtime.devices import list_devices

    info = list_devices()
    if args.json == "-":
        from ..report.jsonio import json_stdout

        print(json.dumps(info.to_dict(), indent=2), file=json_stdout())
        return EXIT_PASS
    print(render_devices(info))
    if args.json:
        try:
            with open(args.json, "w") as f:
                f.write(json.dumps(info.to_dict(), indent=2) + "\n")
        except OSError as exc:
            raise TfparityError(f"Cannot write {args.json}: {exc.strerror}.") from exc
    return EXIT_PASS


def render_devices(info) -> str:
    lines = ["tfparity devices", ""]
    for d in info.devices:
        parts = [d.name]
        if d.description:
            parts.append(d.description)
        if d.compute_capability:
            parts.append(f"compute capability {d.compute_capability}")
        if d.memory_limit_bytes:
            parts.append(f"{d.memory_limit_bytes / 2**30:.1f} GiB usable by TF")
        if d.device_type == "GPU":
            parts.append("TF32 capable" if d.tf32_capable else "no TF32")
        lines.append(f"  {d.short:<7} " + " · ".join(parts))
    cuda = (
        f"CUDA {info.cuda_version or '?'}, cuDNN {info.cudnn_version or '?'}"
        if info.is_cuda_build
        else "not built with CUDA"
    )
    lines += [
        "",
        f"tensorflow {info.tensorflow_version} · {cuda}",
        f"TF32 execution: {'enabled' if info.tf32_enabled else 'disabled'} "
        "(applies only to GPUs of compute capability 8.0+)",
    ]
    lines += [f"note: {n}" for n in info.notes]
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_run_devices(argparse.Namespace(json=None)))
