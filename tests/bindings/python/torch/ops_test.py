"""What torch has beyond gloo's reductions, through the backend "lockstep", against a numpy oracle built from every
rank's inputs (2 and 3 ranks): BAND, BOR and BXOR on integer and bool tensors, SUM, PRODUCT, MIN and MAX on int16,
SUM, PRODUCT and AVG on complex64/128, PREMUL_SUM with a float and a tensor factor (in all_reduce, reduce and
reduce_scatter_tensor), and all_to_all_single / all_to_all with uneven splits and zero-size blocks (one alltoallv).

Run by run_job.py: mpirun -n N python3 ops_test.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import lockstep  # noqa: E402
import lockstep.torch  # noqa: E402
from harness import expect_raises, run  # noqa: E402

ReduceOp = dist.ReduceOp


def rank_input(r, dtype, numel=6):
    """Rank r's input: small values that differ per rank and position (bit patterns for integers, a real and an
    imaginary part for complex)."""
    base = np.arange(numel) * 5 + r * 3
    if dtype == torch.bool:
        return torch.from_numpy((base % 3 == 0).copy())
    if dtype.is_complex:
        return torch.from_numpy((base % 4 + 1j * ((base + 2) % 3 - 1)).astype(np.complex128)).to(dtype)
    return torch.from_numpy((base % 13 + 1).astype(np.int64)).to(dtype)


NUMPY_REDUCE = {
    "BAND": np.bitwise_and.reduce,
    "BOR": np.bitwise_or.reduce,
    "BXOR": np.bitwise_xor.reduce,
    "SUM": lambda a: np.sum(a, axis=0),
    "PRODUCT": lambda a: np.prod(a, axis=0),
    "MIN": lambda a: np.min(a, axis=0),
    "MAX": lambda a: np.max(a, axis=0),
    "AVG": lambda a: np.mean(a, axis=0),
}


def oracle(name, dtype, n):
    stacked = np.stack([rank_input(i, dtype).numpy() for i in range(n)])
    return torch.from_numpy(np.asarray(NUMPY_REDUCE[name](stacked)).astype(stacked.dtype))


def check_reductions(r, n):
    cases = [
        (name, dtype)
        for name in ("BAND", "BOR", "BXOR")
        for dtype in (torch.int16, torch.uint8, torch.int32, torch.int64, torch.bool)
    ]
    cases += [(name, torch.int16) for name in ("SUM", "PRODUCT", "MIN", "MAX")]
    # torch's all_reduce allows SUM and AVG on complex tensors (and reduce passes them on as they are).
    cases += [(name, dtype) for name in ("SUM", "AVG") for dtype in (torch.complex64, torch.complex128)]
    for name, dtype in cases:
        x = rank_input(r, dtype)
        dist.all_reduce(x, op=getattr(ReduceOp, name))
        expected = oracle(name, dtype, n)
        close = torch.allclose(x, expected) if dtype.is_complex else torch.equal(x, expected)
        assert close, f"all_reduce {name} {dtype}: {x} != {expected}"
        y = rank_input(r, dtype)
        dist.reduce(y, n - 1, op=getattr(ReduceOp, name))
        if r == n - 1:
            assert torch.equal(y, x) or torch.allclose(y, x), f"reduce {name} {dtype}: {y} != {x}"
    # Complex numbers have no order: lockstep refuses MAX on every rank (torch's all_reduce refuses it first; its
    # reduce does not).
    error = expect_raises(lockstep.DTypeError, dist.reduce, rank_input(r, torch.complex64), 0, op=ReduceOp.MAX)
    assert "complex64" in str(error), error
    # The product of complex numbers, through reduce.
    y = rank_input(r, torch.complex128)
    dist.reduce(y, 0, op=ReduceOp.PRODUCT)
    if r == 0:
        expected = oracle("PRODUCT", torch.complex128, n)
        assert torch.allclose(y, expected), (y, expected)


def check_premul(r, n):
    factors = [0.5, 2.0, -1.5][:n]
    inputs = [torch.arange(4, dtype=torch.float64) + i for i in range(n)]
    expected = sum(f * x for f, x in zip(factors, inputs))
    for factor in (factors[r], torch.tensor([factors[r]], dtype=torch.float64)):
        op = dist._make_nccl_premul_sum(factor if isinstance(factor, float) else [factor])
        x = inputs[r].clone()
        dist.all_reduce(x, op=op)
        assert torch.allclose(x, expected), (x, expected)
        y = inputs[r].clone()
        dist.reduce(y, 0, op=op)
        if r == 0:
            assert torch.allclose(y, expected), (y, expected)
        stacked = torch.cat([inputs[r] * (j + 1) for j in range(n)])
        out = torch.zeros(4, dtype=torch.float64)
        (getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base)(out, stacked, op=op)
        assert torch.allclose(out, expected * (r + 1)), (out, expected * (r + 1))


def splits(sender, receiver, n):
    """Rows rank `sender` sends rank `receiver`: 0 to 3, zero for some pairs (sender + receiver divisible by 3)."""
    return (sender * 2 + receiver) % 4 if (sender + receiver) % 3 else 0


def check_alltoallv(r, n):
    send = [splits(r, j, n) for j in range(n)]
    recv = [splits(i, r, n) for i in range(n)]
    rows = (
        torch.cat([torch.full((send[j], 2), float(100 * r + j)) for j in range(n)]) if sum(send) else torch.zeros(0, 2)
    )
    out = torch.full((sum(recv), 2), -1.0)
    dist.all_to_all_single(out, rows, output_split_sizes=recv, input_split_sizes=send)
    expected = torch.cat([torch.full((recv[i], 2), float(100 * i + r)) for i in range(n)]) if sum(recv) else out
    assert torch.equal(out, expected), (send, recv, out, expected)
    # The list form: tensor j to rank j, with empty tensors among them.
    ins = [torch.full((send[j],), r * 10 + j, dtype=torch.int16) for j in range(n)]
    outs = [torch.full((recv[i],), -1, dtype=torch.int16) for i in range(n)]
    dist.all_to_all(outs, ins)
    for i in range(n):
        assert torch.equal(outs[i], torch.full((recv[i],), i * 10 + r, dtype=torch.int16)), (i, outs[i])


def main():
    dist.init_process_group("lockstep")
    r, n = dist.get_rank(), dist.get_world_size()
    check_reductions(r, n)
    check_premul(r, n)
    check_alltoallv(r, n)
    dist.barrier()
    dist.destroy_process_group()
    return r, n


if __name__ == "__main__":
    run("torch_ops", main)
