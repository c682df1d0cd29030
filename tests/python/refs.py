"""fp64 references written from the published formulas, and bf16 bit helpers; nothing here
calls opforge."""

import numpy as np

SIZES = [1, 5, 17, 1000, 65543]


def adam_tf(var, m, v, grad, lr, beta1, beta2, epsilon, t, nesterov=False):
    """TensorFlow ApplyAdam (training_ops.cc): lr_t = lr*sqrt(1-b2^t)/(1-b1^t);
    m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2; var -= lr_t*m/(sqrt(v)+eps)."""
    var, m, v, g = (np.asarray(x, np.float64) for x in (var, m, v, grad))
    lr_t = lr * np.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    num = g * (1 - beta1) + beta1 * m if nesterov else m
    return var - lr_t * num / (np.sqrt(v) + epsilon), m, v


def adam_torch(var, m, v, grad, lr, beta1, beta2, epsilon, t):
    """torch.optim.Adam (1.13, _single_tensor_adam): m = b1*m + (1-b1)*g;
    v = b2*v + (1-b2)*g^2; var -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)."""
    var, m, v, g = (np.asarray(x, np.float64) for x in (var, m, v, grad))
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    denom = np.sqrt(v) / np.sqrt(1 - beta2 ** t) + epsilon
    return var - lr / (1 - beta1 ** t) * m / denom, m, v


def to_bf16_bits(x):
    """float32 -> bfloat16 bits (uint16), round to nearest even (no NaN inputs)."""
    b = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return b.astype(np.uint16)


def from_bf16_bits(b):
    """bfloat16 bits (uint16) -> float64, exactly."""
    return (np.asarray(b, np.uint16).astype(np.uint32) << 16).view(np.float32).astype(
        np.float64)


def adam_inputs(n, seed, t=3):
    """fp32 var, m, v, grad of n elements as after some steps (v >= 0)."""
    rng = np.random.default_rng(seed)
    var = rng.standard_normal(n).astype(np.float32)
    m = (0.1 * rng.standard_normal(n)).astype(np.float32)
    v = (0.01 * rng.random(n)).astype(np.float32)
    grad = rng.standard_normal(n).astype(np.float32)
    return var, m, v, grad


HYPER = dict(lr=0.01, beta1=0.9, beta2=0.999, epsilon=1e-8)


def powers(t, beta1=HYPER["beta1"], beta2=HYPER["beta2"]):
    return dict(beta1_power=beta1 ** t, beta2_power=beta2 ** t)
