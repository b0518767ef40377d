"""The cross-check, TF against PyTorch on the same weights: its runs, what the
checkpoints hold, the label maps and tokenizers, task agreement, the budgets of
quantised sides, the distribution metrics of LM heads, localisation and hints, and the
export-against-source comparison.
"""
