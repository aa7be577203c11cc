"""A CIFAR ResNet with GroupNorm in place of BatchNorm, written for `torch.func`.

He et al. 2016 ("Deep residual learning for image recognition", §4.2) define the CIFAR-10
ResNets: a 3×3 convolution to ``width`` channels, then three stages of ``n`` basic blocks at
``width``, ``2·width`` and ``4·width`` channels (the first block of stages two and three halves
the image side with stride 2), global average pooling and one linear layer: ``6n + 2`` layers
with weights, ResNet-20 for ``n = 3``. A basic block is

    y = ReLU(x̂ + N₂(conv₂(ReLU(N₁(conv₁(x)))))),

where x̂ is x itself, or, where the block halves the side and widens the channels, x sampled
at stride 2 with zero channels added (their "option A", which adds no parameter).

BatchNorm mixes the samples of a batch, so a per-sample gradient would not be one sample's
and DP-SGD's sensitivity argument would fail; DP training replaces it by GroupNorm (Wu & He
2018), which normalises each sample on its own over groups of channels (Kurakin et al. 2022;
De et al. 2022, "Unlocking high-accuracy differentially private image classification through
scale", §3.2, whose WRNs use 16 groups; Opacus' CIFAR-10 example). GroupNorm's scale and
shift are parameters and it keeps no running statistics, so the model stays a pure function
of its parameters: no buffers, no in-place operation on a tensor autograd keeps, nothing
that draws random numbers.

The convolutions have no bias, as the norm after each one would cancel it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ResidualBlock", "resnet_gn"]


class ResidualBlock(nn.Module):
    """He et al.'s basic block with GroupNorm: two 3×3 convolutions and a parameter-free shortcut.

    Args:
        in_channels: channels of the block's input.
        out_channels: channels of its output, ≥ ``in_channels``; the shortcut pads the missing
            ones with zeros.
        stride: 1, or 2 to halve the image side (the first convolution and the shortcut both
            sample at this stride, so their sides agree for odd sides too: ⌈side / 2⌉).
        groups: GroupNorm's number of groups; it divides ``out_channels``.
    """

    def __init__(self, in_channels: int, out_channels: int, *, stride: int, groups: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.norm1 = nn.GroupNorm(groups, out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.norm2 = nn.GroupNorm(groups, out_channels)
        self.stride = stride
        self.added_channels = out_channels - in_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Returns the block's output [B, out_channels, ⌈H/stride⌉, ⌈W/stride⌉] for x [B, C, H, W]."""
        out = F.relu(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        # out-of-place sums and activations: vmap and grad see a plain function of x
        return F.relu(out + self._shortcut(x))

    def _shortcut(self, x: torch.Tensor) -> torch.Tensor:
        """Returns x at the output's side and channels (He et al.'s option A)."""
        if self.stride != 1:
            x = x[:, :, :: self.stride, :: self.stride]
        if self.added_channels:
            half = self.added_channels // 2
            x = F.pad(x, (0, 0, 0, 0, half, self.added_channels - half))
        return x


def resnet_gn(
    lead: list[nn.Module], channels: int, num_classes: int, *, blocks_per_stage: int, width: int, groups: int
) -> nn.Sequential:
    """Returns the CIFAR ResNet with ``6·blocks_per_stage + 2`` layers with weights, GroupNorm throughout.

    The options are taken as given (`dpfl.models` checks a spec's values before calling this).

    Args:
        lead: modules that bring the input to [B, channels, H, W] (a grey image's channel).
        channels: the images' channels, 3 for CIFAR-10 and 1 for MNIST.
        blocks_per_stage: n, the basic blocks in each of the three stages.
        width: the first stage's channels (16 in He et al.); the others have 2× and 4×.
        groups: GroupNorm's groups, dividing ``width``.
    """
    layers: list[nn.Module] = [
        *lead,
        nn.Conv2d(channels, width, 3, padding=1, bias=False),
        nn.GroupNorm(groups, width),
        nn.ReLU(),
    ]
    previous = width
    for stage in range(3):
        out = width * 2**stage
        for block in range(blocks_per_stage):
            stride = 2 if stage > 0 and block == 0 else 1
            layers.append(ResidualBlock(previous, out, stride=stride, groups=groups))
            previous = out
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(previous, num_classes)]
    return nn.Sequential(*layers)
