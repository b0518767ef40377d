"""What both TF sides share (Hugging Face TF on tf-keras, keras-hub on Keras 3): the
gradient tape's scalar and gradients, Keras layers' weights read into numpy, and the
gradient faults of the catalogue.
"""
