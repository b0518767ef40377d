"""The keras-hub side (Keras 3): backbones and causal-LM tasks converted from Hugging
Face checkpoints, their weights traced to Hugging Face names, taps, generation and
gradients.
"""
