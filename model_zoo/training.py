"""The training and evaluation steps every recipe shares (the MNIST demo and the zoo recipes):
float training, QAT fine-tuning, accuracy, and the deployed model checked against the reference.
"""
from typing import NamedTuple

import torch
from torch import nn
from tqdm import tqdm

import qtk


def train(model, data, epochs, lr, desc, on_epoch=None, batch_size=64, shuffle_seed=1,
          transform=None, after_step=None, loss=None):
    """Adam with a one-cycle schedule over ``epochs`` passes of ``data`` (shuffled from
    ``shuffle_seed``); ``on_epoch(model, epoch)`` runs before each epoch, ``transform(images)``
    augments each batch, ``after_step(model)`` runs after each optimizer step, and
    ``loss(logits, inputs, labels)`` replaces the cross-entropy (a distillation's). Returns the
    model in eval mode."""
    images, labels = data
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    steps = epochs * ((len(labels) + batch_size - 1) // batch_size)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, lr, total_steps=steps)
    generator = torch.Generator().manual_seed(shuffle_seed)
    for epoch in range(epochs):
        if on_epoch:
            on_epoch(model, epoch)
        model.train()
        order = torch.randperm(len(labels), generator=generator)
        batches = order.split(batch_size)
        for batch in tqdm(batches, desc=f"{desc} epoch {epoch + 1}/{epochs}", leave=False):
            inputs = images[batch] if transform is None else transform(images[batch])
            logits = model(inputs)
            value = (nn.functional.cross_entropy(logits, labels[batch]) if loss is None
                     else loss(logits, inputs, labels[batch]))
            optimizer.zero_grad()
            value.backward()
            optimizer.step()
            schedule.step()
            if after_step:
                after_step(model)
    return model.eval()


def train_qat(float_model, data, epochs, lr, desc="QAT"):
    """``qtk.quantize_qat`` a trained float model and fine-tune it; the last epoch trains with
    BatchNorm statistics frozen (``qtk.freeze_bn_stats``), so the folded weights settle."""

    def freeze_late(model, epoch):
        if epoch == epochs - 1:
            qtk.freeze_bn_stats(model)

    return train(qtk.quantize_qat(float_model), data, epochs, lr, desc, freeze_late)


@torch.no_grad()
def accuracy(predict, data, batch_size=250):
    """Top-1 accuracy in percent of ``predict(images) -> logits`` over ``data``."""
    images, labels = data
    correct = sum(int((predict(x).argmax(1) == y).sum()) for x, y in
                  zip(images.split(batch_size), labels.split(batch_size)))
    return 100.0 * correct / len(labels)


class Deployed(NamedTuple):
    accuracy: float  # the runtime's, percent
    identical: int  # samples whose int8 outputs are the same bytes in runtime and reference
    reference_accuracy: float  # the Quantized reference's, percent


@torch.no_grad()
def compare_deployed(quantized, session, data, batch_size=100, desc="runtime"):
    """Run ``data`` through the runtime ``session`` and the Quantized reference in batches; returns
    a :class:`Deployed`. Accuracies come from the int8 logits (dequantizing is monotonic, so the
    argmax is the same), so each model runs once per batch."""
    images, labels = data
    correct = reference_correct = identical = 0
    batches = list(zip(images.split(batch_size), labels.split(batch_size)))
    for x, y in tqdm(batches, desc=desc, leave=False):
        runtime_int8 = session.run(x, output="int8")
        with qtk.int8_outputs(quantized):
            reference_int8 = quantized(x)
        identical += int((reference_int8 == runtime_int8).flatten(1).all(dim=1).sum())
        correct += int((runtime_int8.argmax(1) == y).sum())
        reference_correct += int((reference_int8.argmax(1) == y).sum())
    return Deployed(100.0 * correct / len(labels), identical,
                    100.0 * reference_correct / len(labels))


@torch.no_grad()
def reestimate_batchnorm(model, shape, batches=3):
    """BatchNorm statistics of a randomly initialized ``model`` re-estimated on random data of
    ``shape`` (train-mode forwards, cumulative average): without this, deep nets with random
    weights have near-zero activations and degenerate int8 outputs. Returns it in eval mode."""
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.reset_running_stats()
            module.momentum = None
    model.train()
    for _ in range(batches):
        model(torch.randn(shape))
    return model.eval()

