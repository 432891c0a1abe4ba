"""A TensorFlow agent beside the JAX one: its optimizer is a tf.compat.v1 optimizer."""
import tensorflow.compat.v1 as tf


class TFAgent:

  def __init__(self, lr):
    self.optimizer = tf.train.AdamOptimizer(lr)

  def build(self, loss):
    return self.optimizer.minimize(loss)

  def reset(self, other):
    other.optimizer = None
    return other.optimizer.get_slot_names()
