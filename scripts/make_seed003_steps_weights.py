#!/usr/bin/python3
"""Writes data/seed003_steps_weights.npz: the weights seed 003's step-by-step
walk uses. The notebook draws them with no fresh seed: after
torch.manual_seed(123) it built a 2-head MultiHeadAttentionWrapper (six
nn.Linear(3, 2, bias=False)), then W_query, W_key, W_value = nn.Linear(6, 6).
The walk stops before an output projection; the next nn.Linear(6, 6) drawn
stands in for out_proj so that the mha_causal variant can run the steps."""
import os
import numpy as np
import torch
from torch import nn

torch.manual_seed(123)
for _ in range(6):
    nn.Linear(3, 2, bias=False)
W_query, W_key, W_value, out_proj = (nn.Linear(6, 6) for _ in range(4))
weights = {}
for name, layer in [("W_query", W_query), ("W_key", W_key), ("W_value", W_value), ("out_proj", out_proj)]:
    weights[name + ".weight"] = layer.weight.detach().numpy()
    weights[name + ".bias"] = layer.bias.detach().numpy()
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
np.savez(os.path.join(root, "data", "seed003_steps_weights.npz"), **weights)
