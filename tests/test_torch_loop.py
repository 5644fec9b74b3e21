"""The one training loop (agl_fast.torch.loop): accumulation, learning
rate, clipping and the step's loss, against steps written out by hand."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

torch = pytest.importorskip("torch")

from agl_fast.torch.loop import Optimiser, Processes, Step, run_steps, start_processes  # noqa: E402

pytestmark = pytest.mark.torch


def _model(seed: int = 0) -> torch.nn.Linear:
    torch.manual_seed(seed)
    return torch.nn.Linear(3, 1)


def _data(n: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 3, generator=g), torch.randn(n, 1, generator=g)


def test_micro_batches_add_up_to_the_whole_batch() -> None:
    """Two micro-batches of 4 give the update of one batch of 8 (mean loss)."""
    x, y = _data()
    whole, parts = _model(), _model()
    opt_whole = torch.optim.SGD(whole.parameters(), lr=0.1)
    ((whole(x) - y) ** 2).mean().backward()
    opt_whole.step()

    opt = Optimiser(torch.optim.SGD(parts.parameters(), lr=0.1), parts.parameters())
    seen: list[float] = []

    def loss(item: tuple[torch.Tensor, torch.Tensor], _j: int) -> torch.Tensor:
        return ((parts(item[0]) - item[1]) ** 2).mean()

    micro = [(x[:4], y[:4]), (x[4:], y[4:])]
    n = run_steps(opt, [Step(micro)], loss, device=torch.device("cpu"),
                  on_step=lambda value, _s: seen.append(value))  # fmt: skip
    assert n == 1
    torch.testing.assert_close(parts.weight, whole.weight, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(parts.bias, whole.bias, rtol=1e-6, atol=1e-7)
    with torch.no_grad():
        expected = float(((_model()(x) - y) ** 2).mean())
    assert seen == [pytest.approx(expected, rel=1e-6)]
    assert all(p.grad is None for p in parts.parameters())


def test_the_steps_learning_rate_is_set_and_none_keeps_it() -> None:
    model = _model()
    sgd = torch.optim.SGD(model.parameters(), lr=0.5)
    x, y = _data()
    lrs: list[float] = []

    def loss(_item: object, _j: int) -> torch.Tensor:
        return ((model(x) - y) ** 2).mean()

    run_steps(Optimiser(sgd, model.parameters()), [Step([0], lr=0.01), Step([0])], loss,
              device=torch.device("cpu"),
              on_step=lambda _v, _s: lrs.append(sgd.param_groups[0]["lr"]))  # fmt: skip
    assert lrs == [0.01, 0.01]


def test_clipping_bounds_the_update() -> None:
    """SGD at lr 1: the parameters move by the clipped gradient, norm 0.25."""
    model = _model()
    before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    x, y = _data()

    def loss(_item: object, _j: int) -> torch.Tensor:
        return 1000.0 * ((model(x) - y) ** 2).mean()

    opt = Optimiser(torch.optim.SGD(model.parameters(), lr=1.0), model.parameters(), 0.25)
    run_steps(opt, [Step([0])], loss, device=torch.device("cpu"))
    after = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert float(torch.linalg.vector_norm(after - before)) == pytest.approx(0.25, rel=1e-5)


def test_the_plan_decides_how_many_steps_run() -> None:
    model = _model()
    opt = Optimiser(torch.optim.SGD(model.parameters(), lr=0.1), model.parameters())
    x, y = _data()

    def loss(_item: object, _j: int) -> torch.Tensor:
        return ((model(x) - y) ** 2).mean()

    def plan(stop_after: int) -> Iterator[Step]:
        for _ in range(stop_after):
            yield Step([0])

    assert run_steps(opt, plan(0), loss, device=torch.device("cpu")) == 0
    assert run_steps(opt, plan(3), loss, device=torch.device("cpu")) == 3


def test_one_process_without_torchrun(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    procs, dev = start_processes("cpu")
    assert procs == Processes(0, 1, 0) and procs.main and dev == torch.device("cpu")
