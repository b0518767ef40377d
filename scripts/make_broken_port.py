"""Write a deliberately broken TF port of minilm, to try `tfparity crosscheck --tf DIR --pt minilm`.

    python scripts/make_broken_port.py OUT_DIR [--fault zero-attention-bias|gelu-new]

zero-attention-bias zeroes layer 3's attention value bias; gelu-new saves the port with
`hidden_act: gelu_new` (the reference uses exact `gelu`).
"""

from __future__ import annotations

import argparse

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument(
        "--fault", choices=("zero-attention-bias", "gelu-new"), default="zero-attention-bias"
    )
    args = parser.parse_args()

    from tfparity.adapters.hf_tf.tf_model import TFModel

    model = TFModel.load("minilm")
    if args.fault == "zero-attention-bias":
        bias = model.model.bert.encoder.layer[3].attention.self_attention.value.bias
        bias.assign(np.zeros(bias.shape, np.float32))
    else:
        model.model.config.hidden_act = "gelu_new"
    model.model.save_pretrained(args.out)
    model.tokenizer.save_pretrained(args.out)
    print(f"wrote a broken port ({args.fault}) to {args.out}")


if __name__ == "__main__":
    main()
