"""ViT-S/16 at 384 x 384, two layers, random weights (seed 0): a transformer kept out of every
choice made on the model benchmark. Its 577 tokens are a prime, as ViT-B/16's 197 are, at other
widths (384 hidden, 6 heads, 1536 MLP). `hiertune tune --model bench/models/vit_small_384.py:make`."""

import torch
import transformers


class LastHiddenState(torch.nn.Module):
    """The ViT returning one tensor, as the compilers and ONNX Runtime compare it."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.model(pixel_values=pixels).last_hidden_state


def make() -> tuple[torch.nn.Module, torch.Tensor]:
    config = transformers.ViTConfig(image_size=384, hidden_size=384, num_hidden_layers=2,
                                    num_attention_heads=6, intermediate_size=1536)
    torch.manual_seed(0)
    return LastHiddenState(transformers.ViTModel(config).eval()), torch.randn(1, 3, 384, 384)
