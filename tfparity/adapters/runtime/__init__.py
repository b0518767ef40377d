"""How things run: lazy framework imports, devices, execution options (eager,
tf.function, XLA, precision) and compiled paths.
"""
