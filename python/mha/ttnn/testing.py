"""pytest plugin for TT-NN tests on tt-sim: `pytest -p mha.ttnn.testing`, or
`pytest_plugins = ["mha.ttnn.testing"]` in a conftest.py.

Fixtures: `device` (a tt-sim device, opened per test with the test's
`device_params` if it parametrizes them indirectly, as tt-metal's conftest
does), `device_params`, `reset_seeds`. Helpers with the meaning tt-metal's
test utilities give them (models/common/utility_functions.py,
tests/ttnn/utils_for_testing.py): comp_pcc, comp_allclose,
comp_allclose_and_pcc, assert_with_pcc, assert_allclose.
"""
import random

import numpy as np
import pytest

from .._arrays import torch_module
from . import close_device, open_device, to_torch
from .tensor import Tensor


def _torch_of(t):
    torch = torch_module()
    if isinstance(t, Tensor):
        t = to_torch(t)
    t = torch.as_tensor(t)
    if t.dtype in (torch.int16, torch.int8, torch.uint8):
        t = t.to(torch.int32)
    return t


def _same_dtype(golden, calculated):
    golden, calculated = _torch_of(golden), _torch_of(calculated)
    if calculated.dtype != golden.dtype:
        calculated = calculated.type(golden.dtype)
    return golden, calculated


def comp_pcc(golden, calculated, pcc=0.99):
    """(passed, "PCC: value"): the Pearson correlation of the two flattened
    tensors after NaN and +-inf are zeroed in both; equal tensors (after
    that) and an undefined correlation count as 1.0; all-NaN on one side
    only, or all-zero on one side only, as 0.0."""
    torch = torch_module()
    golden, calculated = _same_dtype(golden, calculated)
    g_nan, c_nan = torch.isnan(golden), torch.isnan(calculated)
    if bool(torch.all(g_nan)) and bool(torch.all(c_nan)):
        return True, "PCC: 1.0"
    if bool(torch.all(g_nan)) or bool(torch.all(c_nan)):
        return False, "PCC: 0.0"
    if bool(torch.any(golden.bool())) != bool(torch.any(calculated.bool())):
        return False, "PCC: 0.0"
    golden = torch.where(torch.isfinite(golden), golden, torch.zeros_like(golden))
    calculated = torch.where(torch.isfinite(calculated), calculated, torch.zeros_like(calculated))
    if torch.equal(golden, calculated):
        return True, "PCC: 1.0"
    g = golden.to(torch.float64).reshape(-1).numpy()
    c = calculated.to(torch.float64).reshape(-1).numpy()
    value = np.min(np.ma.corrcoef(np.ma.masked_invalid(g), np.ma.masked_invalid(c)))
    if isinstance(value, np.ma.core.MaskedConstant):
        return True, "PCC: 1.0"
    return bool(value >= pcc), f"PCC: {value}"


def comp_allclose(golden, calculated, rtol=1e-05, atol=1e-08):
    """(torch.allclose(golden, calculated, rtol, atol, equal_nan=True),
    "Max ATOL Delta: a, Max RTOL Delta: r") where a = max |g - c| and
    r = max |g - c| / |c|."""
    torch = torch_module()
    golden, calculated = _same_dtype(golden, calculated)
    diff = torch.abs(golden - calculated)
    atol_delta = torch.max(diff).item()
    rtol_delta = torch.max(diff / torch.abs(calculated)).item()
    return (bool(torch.allclose(golden, calculated, rtol, atol, True)),
            f"Max ATOL Delta: {atol_delta}, Max RTOL Delta: {rtol_delta}")


def comp_allclose_and_pcc(golden, calculated, rtol=1e-05, atol=1e-08, pcc=0.99):
    golden, calculated = _same_dtype(golden, calculated)
    passed, message = comp_allclose(golden, calculated, rtol, atol)
    if golden.numel() != 1:
        ok, pcc_message = comp_pcc(golden, calculated, pcc)
        passed, message = passed and ok, f"{message}, {pcc_message}"
    return passed, message


def _shapes_match(expected, actual):
    assert list(expected.shape) == list(actual.shape), (
        f"list(expected_pytorch_result.shape)={list(expected.shape)} vs "
        f"list(actual_pytorch_result.shape)={list(actual.shape)}")


def assert_with_pcc(expected_pytorch_result, actual_pytorch_result, pcc=0.9999):
    """Asserts equal shapes and comp_pcc; returns (passed, message)."""
    expected, actual = _torch_of(expected_pytorch_result), _torch_of(actual_pytorch_result)
    _shapes_match(expected, actual)
    passed, message = comp_pcc(expected, actual, pcc)
    assert passed, message
    return passed, message


def assert_allclose(expected_result, actual_result, rtol=1e-05, atol=1e-08):
    expected, actual = _torch_of(expected_result), _torch_of(actual_result)
    _shapes_match(expected, actual)
    passed, message = comp_allclose(expected, actual, rtol, atol)
    assert passed, message
    return passed, message


# --- fixtures ----------------------------------------------------------------

@pytest.fixture
def device_params(request):
    """open_device's keywords; a test overrides them with
    @pytest.mark.parametrize("device_params", [{...}], indirect=True)."""
    return dict(getattr(request, "param", {}) or {})


@pytest.fixture
def device(device_params):
    dev = open_device(device_id=0, **device_params)
    yield dev
    close_device(dev)


@pytest.fixture
def reset_seeds():
    """The seeds tt-metal's conftest resets before a test."""
    torch_module().manual_seed(213919)
    np.random.seed(213919)
    random.seed(213919)
