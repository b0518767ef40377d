"""The distribution metrics of a seq2seq LM's decoder logits in ``crosscheck``
(docs/quantised.md): the decoder is teacher-forced on each row's own ids (its start
token, then the ids but the last), so position t is scored at the row's own id t, under
the batch's mask, which is the decoder's.

Both ways, on a real tiny T5: the clean port passes a ``--kl-budget`` with KL at float32
rounding; a decoder whose layer 1 FFN output weight is scaled by 20 fails it, with the
failing term's row in the report.
"""

from __future__ import annotations

import numpy as np

from tfparity import crosscheck
from tfparity.adapters.hf_tf.tf_model import TFModel
from tfparity.adapters.hf_tf.weight_names import tf_weights_by_pt_name
from tfparity.architectures.heads import Head
from tfparity.checks.crosscheck.distribution import own_token_targets
from tfparity.cli import main
from tfparity.inputs import Batch
from tfparity.testing import scale

SPEC = "tiny:t5/seq2seq-lm"
BUDGET = "kl_mean=0.001,same_top1=0.99"
DECODER_FFN = "decoder.block.1.layer.2.DenseReluDense.wo.weight"


def test_the_targets_are_the_rows_own_ids_under_the_mask_either_padding_side():
    ids = np.array([[5, 6, 7, 0], [0, 8, 9, 4]])
    mask = np.array([[1, 1, 1, 0], [0, 1, 1, 1]])
    targets = own_token_targets(Batch(input_ids=ids, attention_mask=mask))
    assert targets.tolist() == [[5, 6, 7, -1], [-1, 8, 9, 4]]


def test_a_clean_t5_passes_a_kl_budget_on_its_decoder_logits(capsys):
    assert main(["crosscheck", SPEC, "--no-reload", "--kl-budget", BUDGET]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("distribution (logits, "))
    assert "(at the target token)" in line and "ln(PPL(TF)/PPL(PyTorch))" in line
    assert "distribution budget PASS over 5 sequences" in out


def test_a_broken_decoder_fails_the_kl_budget():
    port = TFModel.load("tiny:t5", head=Head.SEQ2SEQ_LM, decoders=True)
    scale(tf_weights_by_pt_name(port.model)[DECODER_FFN].variable, 20.0)
    (report,) = crosscheck(tf=port, pt=SPEC, kl_budget=BUDGET, reload=False)
    d = report.details["distribution"]
    # every real decoder position is scored, at its own id (a target: an NLL too)
    top1 = report.details["agreement"][0]  # over every real token
    assert top1["measure"] == "top-1" and d["positions"] == top1["total"]
    assert d["dp_at"] == "target" and d["ln_ppl_ratio"] is not None
    assert d["budget"]["verdict"] == "FAIL" and d["same_top1"] < 0.5
    assert not report.passed
    failed = [c.name for c in report.failures]
    assert "distribution same_top1 (logits)" in failed
