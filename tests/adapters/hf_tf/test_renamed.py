"""DeBERTa-v2 with ``share_att_key=false`` (tfparity/adapters/hf_tf/renamed.py): TF's
class names the unshared position projections otherwise than PyTorch, so they do not
load; the cross-check names which weights and why (exit 1), not config.json (exit 2).
The same checkpoint with shared keys passes without that finding."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, save_tiny):
    torch = pytest.importorskip("torch")
    import transformers

    from tfparity.adapters.sources.tiny import tiny_config

    root = tmp_path_factory.mktemp("deberta-v2")
    found = {}
    for name, shared in (("unshared", False), ("shared", True)):
        config = tiny_config("deberta-v2")
        config.share_att_key = shared
        torch.manual_seed(0)
        found[name] = save_tiny(transformers.DebertaV2Model(config), root / name)
    return found


def test_unshared_position_projections_are_named_as_not_loaded(checkpoints, crosscheck_dir):
    report = crosscheck_dir(checkpoints["unshared"])  # no TfparityError: not a config blame
    assert not report.passed
    (failure,) = [c for c in report.comparisons if c.name == "weights:missing from the port"]
    for text in (failure.problem, report.first_divergence.hint):
        assert "'pos_proj' in TF, 'pos_key_proj' in PyTorch" in text, text
        assert "'pos_q_proj' in TF, 'pos_query_proj' in PyTorch" in text, text
        assert "encoder.layer.0.attention.self.pos_key_proj.weight" in text, text
        assert "did not load and TF's were left random" in text, text
    assert "computation itself differs" not in report.first_divergence.hint


def test_shared_position_projections_pass_without_that_finding(checkpoints, crosscheck_dir):
    report = crosscheck_dir(checkpoints["shared"])
    assert report.passed, report.first_divergence
    assert not any("pos_proj" in n for n in report.notes), report.notes
