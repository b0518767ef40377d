"""How every command names the model it runs: one table, one way to add the options.

A user who learned ``crosscheck --tf A --pt B`` should not be stopped by the next
command with "unrecognized arguments". So every command that runs a TF model gets the
same model-naming options from :func:`add_model_naming`, each with one help text, and
:data:`NAMING` says, per command, which of them it takes and why each other one does
not apply. An option that does not apply is still parsed (hidden from ``--help``) and
refused by :func:`settle_model_naming` with exit 2 and that reason: one rule, in every
command, instead of argparse's bare "unrecognized arguments".
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..errors import TfparityError

# What MODEL means when neither MODEL nor --tf is given (a real pretrained BERT).
DEFAULT_MODEL = "minilm"

# The model-naming options, in the order a command's --help lists them.
OPTIONS = (
    "MODEL",
    "--allow-pickle",
    "--tf",
    "--pt",
    "--source",
    "--signature",
    "--head",
    "--pt-config",
    "--backend",
)

NO_REFERENCE = "it runs the TF model alone, with no PyTorch reference to name or change"
NOT_EXPORTS = (
    "it runs a Hugging Face TF, keras-hub or own model, not an export (a SavedModel, a "
    ".keras or LiteRT file), which alone needs a source and a signature"
)
OWN_CLASS = (
    "it runs the class MODEL's config names; tiny:<model_type>/<head> loads a tiny "
    "model with a head (--head picks the class on both sides of a comparison)"
)
# Why a command other than crosscheck, generate and gradients refuses --backend (so far).
BACKEND_CROSSCHECK = (
    "--backend (a keras-hub model on the jax or torch Keras backend, in a process of its "
    "own) is built for `tfparity crosscheck`, `tfparity generate` and `tfparity "
    "gradients` so far"
)
BACKENDS_ONLY = (
    "it runs one Keras 3 model on each Keras backend against a float64 run of itself "
    "(a keras-hub spec also against Hugging Face PyTorch, its checkpoint or --pt, as "
    "keras-hub reads it): no PyTorch checkpoint to unpickle and no config to change"
)


@dataclass(frozen=True)
class Naming:
    """The model-naming options one command takes; ``refused`` maps each other option
    of :data:`OPTIONS` to why it does not apply (the sentence the refusal prints).
    Every option is in one of the two, so a new option must be decided per command."""

    takes: tuple[str, ...]
    refused: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        named = sorted((*self.takes, *self.refused))
        if named != sorted(OPTIONS):
            raise ValueError(f"a Naming must decide each of {OPTIONS} once, not {named}")


_TF_ALONE = Naming(
    takes=("MODEL", "--allow-pickle"),
    refused={
        "--tf": f"{NO_REFERENCE}; name that model as MODEL",
        "--pt": NO_REFERENCE,
        "--pt-config": NO_REFERENCE,
        "--source": NOT_EXPORTS,
        "--signature": NOT_EXPORTS,
        "--head": OWN_CLASS,
        "--backend": BACKEND_CROSSCHECK,
    },
)

# Per command that runs a TF model: the options it takes, and why not the others.
NAMING: dict[str, Naming] = {
    "check": Naming(
        takes=("MODEL", "--allow-pickle", "--source", "--signature", "--head", "--pt-config"),
        refused={
            "--tf": "check judges MODEL, and cross-checks it against its own checkpoint; a "
            "port against another reference is `tfparity crosscheck --tf TF_MODEL --pt "
            "PT_MODEL`",
            "--pt": "check cross-checks MODEL against its own checkpoint (an export's: "
            "--source); another reference is `tfparity crosscheck --tf TF_MODEL --pt "
            "PT_MODEL`",
            "--backend": BACKEND_CROSSCHECK,
        },
    ),
    "crosscheck": Naming(takes=OPTIONS),
    "generate": Naming(
        takes=("MODEL", "--allow-pickle", "--tf", "--pt", "--pt-config", "--backend"),
        refused={
            "--source": "generation runs the model's own generate (Hugging Face TF, a "
            "keras-hub CausalLM), which an export does not have; an ONNX file with its KV "
            "cache generates on that cache against --pt, its reference, which also gives "
            "its config and tokenizer (docs/onnx.md)",
            "--signature": "generation runs the model's own generate (Hugging Face TF, a "
            "keras-hub CausalLM), which an export does not have",
            "--head": "generate loads the LM head itself: causal-lm, or seq2seq-lm for T5/mT5",
        },
    ),
    "gradients": Naming(
        takes=("MODEL", "--allow-pickle", "--tf", "--pt", "--head", "--pt-config", "--backend"),
        refused={
            "--source": "gradients differentiate the TF model on a tape, which an export "
            "(a traced graph) does not offer",
            "--signature": "gradients differentiate the TF model on a tape, which an "
            "export (a traced graph) does not offer",
        },
    ),
    "sweep": Naming(
        takes=("MODEL", "--allow-pickle", "--tf", "--pt", "--signature", "--pt-config"),
        refused={
            "--source": "a sweep's export takes its config and tokenizer from --pt, its reference",
            "--head": OWN_CLASS,
            "--backend": BACKEND_CROSSCHECK,
        },
    ),
    "backends": Naming(
        takes=("MODEL", "--pt"),
        refused={
            "--allow-pickle": BACKENDS_ONLY,
            "--tf": f"{BACKENDS_ONLY}; name the model (a .keras file, keras-hub:<SPEC>, "
            "module:function) as MODEL",
            "--pt-config": BACKENDS_ONLY,
            "--source": "MODEL (a .keras file, keras-hub:<SPEC>, module:function) is run "
            "by Keras itself on each backend: it needs no source to take a config or "
            "tokenizer from",
            "--signature": "MODEL is run by Keras itself on each backend, not through a "
            "serving signature",
            "--head": "MODEL is the whole model, its head included (a keras-hub spec: its "
            "backbone)",
            "--backend": "it runs MODEL on every backend --backends names (default: every "
            "one installed)",
        },
    ),
    "runtimes": Naming(
        takes=("MODEL", "--source", "--signature"),
        refused={
            "--allow-pickle": "its source's PyTorch reference is loaded from safetensors "
            "(a pickled checkpoint is not read here)",
            "--tf": "MODEL is the artefact (a .tflite file) run on each kernel set",
            "--pt": "each kernel set is judged against PyTorch from --source, the model the "
            "artefact was converted from, else against the other sets",
            "--pt-config": "each kernel set is judged against its source's own checkpoint",
            "--head": "the artefact runs as converted, its head included",
            "--backend": "it runs an artefact on its runtime's kernel sets, not on a Keras backend",
        },
    ),
    "modes": _TF_ALONE,
    "diagnose": _TF_ALONE,
    "embeddings": _TF_ALONE,
    "positions": Naming(
        takes=("MODEL", "--allow-pickle", "--head"),
        refused={k: v for k, v in _TF_ALONE.refused.items() if k != "--head"},
    ),
}

# The commands that run no model, and why (the table is complete: a test holds that).
NO_MODEL = {
    "devices": "lists the devices TensorFlow and PyTorch see; it loads no model",
    "merge": "merges sweep output directories; it loads no model",
}


def model_help() -> str:
    """MODEL's help, its lists taken from the registry (which imports no framework)."""
    from ..architectures import tiny_types, torch_only_tiny_types
    from ..architectures.heads import UNSUPPORTED, Head

    heads = [h.value for h in Head if h is not Head.BASE and h not in UNSUPPORTED]
    return (
        "a directory with config.json and weights, a cached Hugging Face id, 'minilm' "
        "(default: a real pretrained BERT), 'tiny:<model_type>' (a seeded 2-layer model: "
        f"{', '.join(tiny_types())}; PyTorch only, TF through 'keras-hub:tiny:<model_type>': "
        f"{', '.join(torch_only_tiny_types())}), 'tiny:<model_type>/<head>' (with a seeded "
        f"task head: {', '.join(heads)}), 'keras-hub:<SPEC>' (the checkpoint SPEC "
        "names, converted by keras-hub), or an export: a SavedModel directory or a .keras "
        "file (its config and tokenizer from --source or --pt)"
    )


def _head_choices() -> dict:
    from ..architectures.heads import head_names

    return {
        "choices": head_names(),
        "help": "the model class to check on both sides: "
        f"{', '.join(head_names())} (default: the one config.json's architectures names; "
        "tiny:<model_type>/<KIND> for a seeded tiny head)",
    }


# Each option's argparse arguments: the one help text every command shows.
ARGUMENTS: dict[str, Callable[[], dict]] = {
    "MODEL": lambda: {"nargs": "?", "help": model_help()},
    "--allow-pickle": lambda: {
        "action": "store_true",
        "help": "allow loading pickled PyTorch checkpoints (pytorch_model.bin) with "
        "torch.load(weights_only=True)",
    },
    "--tf": lambda: {
        "metavar": "TF_MODEL",
        "help": "the TF port under test (a MODEL spec), in place of MODEL; checked "
        "against --pt, which it needs",
    },
    "--pt": lambda: {
        "metavar": "PT_MODEL",
        "help": "the PyTorch reference (a MODEL spec; default: the TF model's own "
        "checkpoint). An export or a keras-hub preset directory takes its config, "
        "tokenizer (and weight map) from it. crosscheck: a float .tflite is the "
        "reference of a quantised .tflite (their config from --source)",
    },
    "--source": lambda: {
        "metavar": "SOURCE_MODEL",
        "help": "for an export (a SavedModel directory, a .keras file): the MODEL spec it "
        "was exported from, which gives its config and tokenizer; the report then compares "
        "the export with its source, the export with PyTorch and the source with PyTorch",
    },
    "--signature": lambda: {
        "metavar": "NAME",
        "help": "for a SavedModel or a LiteRT flatbuffer with several signatures: the one "
        "that runs (default: serving_default, else the only one); an unknown NAME exits 2 "
        "listing the signatures it has. One without an attention mask runs unpadded "
        "batches, of one length each",
    },
    "--head": lambda: {"metavar": "KIND", **_head_choices()},
    "--pt-config": lambda: {
        "action": "append",
        "metavar": "KEY=VALUE",
        "help": "build the PyTorch reference (and its float64 referee) with this config "
        "field changed from its checkpoint's (repeatable; VALUE read as JSON where it "
        "parses: numbers, true/false, null; else a string), e.g. hidden_act="
        "gelu_pytorch_tanh to check the rest of a port whose known difference is its GELU; "
        "the report says the reference is not the checkpoint's own",
    },
    "--backend": lambda: {
        "choices": ("tensorflow", "jax", "torch"),
        "help": "the Keras backend a keras-hub:<SPEC> model runs on (default: tensorflow, "
        "in this process; jax or torch: converted here, saved to .keras and run in a "
        "process of its own on that backend, localised to a layer). Only for keras-hub "
        "specs",
    },
}


def dest(option: str) -> str:
    """The attribute an option's value lands on (``--pt-config`` -> ``pt_config``)."""
    return "model" if option == "MODEL" else option.lstrip("-").replace("-", "_")


def add_model_naming(parser: argparse.ArgumentParser, command: str) -> None:
    """Add every model-naming option to ``command``'s parser: those it takes with their
    help, the others hidden, so that :func:`settle_model_naming` refuses them by name."""
    naming = NAMING[command]
    for option in OPTIONS:
        arguments = ARGUMENTS[option]()
        if option not in naming.takes:  # parsed as usual, to be refused with its reason
            kept = {k: v for k, v in arguments.items() if k in ("action", "nargs")}
            arguments = {**kept, "help": argparse.SUPPRESS}
        if option == "MODEL":  # None: given or not is told apart; settle sets the default
            parser.add_argument("model", metavar="MODEL", default=None, **arguments)
        else:
            parser.add_argument(option, dest=dest(option), **arguments)


def settle_model_naming(args: argparse.Namespace) -> None:
    """Refuse what the command's :data:`NAMING` refuses, and the model named twice or a
    port without its reference (exit 2, before anything loads); then ``args.model`` is
    the TF model under test: ``--tf``, else MODEL, else :data:`DEFAULT_MODEL`."""
    naming = NAMING.get(getattr(args, "command", None) or "")
    if naming is None:
        return
    for option, why in naming.refused.items():
        if getattr(args, dest(option), None) not in (None, False, []):
            raise TfparityError(f"`tfparity {args.command}` does not take {option}: {why}.")
    tf, model = getattr(args, "tf", None), args.model
    if tf is not None and model is not None:
        raise TfparityError(
            f"MODEL ({model}) and --tf {tf} both name the TF model under test: give one "
            "(--tf with --pt for a port and its reference, or MODEL alone)."
        )
    if tf is not None and getattr(args, "pt", None) is None:
        raise TfparityError(
            f"--tf {tf} names the TF model, but nothing names its PyTorch reference: add "
            "--pt PT_MODEL (the checkpoint it was ported from), or drop --tf to check "
            "MODEL against its own checkpoint."
        )
    args.model = tf or model or DEFAULT_MODEL
    _parse_specs(args)


def _parse_specs(args: argparse.Namespace) -> None:
    """Parse the MODEL specs the arguments give (MODEL, --pt, --source) now: parsing is
    pure Python (:func:`~tfparity.adapters.sources.specs.parse_spec`, their one home), so
    ``tiny:bret`` or a missing directory exits 2 before TensorFlow or torch is imported.
    ``backends`` also takes a ``.keras`` file or a ``module:function`` as MODEL, which
    its own loader reads: only a prefixed spec of its MODEL is parsed here."""
    from ..adapters.sources.specs import KERAS_HUB, parse_spec

    for option in ("MODEL", "--pt", "--source"):
        value = getattr(args, dest(option), None)
        if not isinstance(value, str):
            continue
        if args.command == "backends" and option == "MODEL" and not value.startswith(KERAS_HUB):
            continue
        spec = parse_spec(value)
        if option == "MODEL":
            _refuse_an_export(args.command, spec)


def _refuse_an_export(command: str, spec) -> None:
    """An export as MODEL of a command that can name neither its source nor its
    reference: say so, and which commands check it, rather than ask for a --source the
    command does not take."""
    from ..adapters.sources.specs import EXPORT_KINDS

    naming = NAMING[command]
    if spec.kind not in EXPORT_KINDS or not {"--source", "--pt"} <= set(naming.refused):
        return
    raise TfparityError(
        f"{spec.text} is {EXPORT_KINDS[spec.kind]}, an export: it holds no Hugging Face "
        "config or tokenizer, and only check, crosscheck and sweep take one, with the "
        f"checkpoint it came from (`tfparity check {spec.text} --source MODEL`, "
        f"`tfparity crosscheck {spec.text} --pt MODEL`)."
    )
