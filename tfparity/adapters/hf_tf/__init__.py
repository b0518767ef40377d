"""The Hugging Face TF side (``TFModel``): loading, the Keras-side gather, embedding
parts, the LM head, weight names, generation, gradients and sub-layer taps.
"""
