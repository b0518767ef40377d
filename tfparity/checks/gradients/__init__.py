"""Gradients through the model, TF against PyTorch and float64: the comparison, the
weights frozen on purpose, and localisation counted backwards.
"""
