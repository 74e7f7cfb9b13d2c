"""A sweep and a training run in a real Jupyter notebook: the cells wait for them, as under
Ray, and the sweep's live view redraws one output area of its cell in place."""

import asyncio
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

SETUP = """\
import time
import actorrt as ray
from actorrt import train, tune
from actorrt.train import ScalingConfig
from actorrt.train.torch import TorchTrainer

ray.init(num_cpus=2)

def objective(config):
    for step in range(6):
        time.sleep(0.4)
        tune.report({"score": config["x"] * (step + 1)})
"""

SWEEP = """\
tuner = tune.Tuner(
    objective,
    param_space={"x": tune.grid_search([1, 2, 3])},
    tune_config=tune.TuneConfig(metric="score", mode="max"),
    run_config=tune.RunConfig(storage_path=STORAGE, name="nb"),
)
grid = tuner.fit()
print("best x:", grid.get_best_result().config["x"], "errors:", len(grid.errors))
"""

TRAIN = """\
def loop(config):
    import torch
    import torch.distributed as dist
    total = torch.tensor([float(train.get_context().get_world_rank() + 1)])
    dist.all_reduce(total)
    train.report({"total": total.item()})

result = TorchTrainer(loop, scaling_config=ScalingConfig(num_workers=2)).fit()
print("world total:", result.metrics["total"])
"""

ASK = """\
@ray.actor
class Echo:
    async def say(self, text):
        return text.upper()

echo = ray.get(Echo.spawn())
print(ray.get(echo.say("hi")))
ray.shutdown()
"""


class Recording(nbclient.NotebookClient):  # type: ignore[misc]
    """Keeps every IOPub message the kernel sent, in order."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.messages: list[dict[str, Any]] = []

    def process_message(self, msg: dict[str, Any], cell: Any, cell_index: int) -> Any:
        self.messages.append(msg)
        return super().process_message(msg, cell, cell_index)


def text_of(outputs: list[Any]) -> str:
    return "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")


@pytest.mark.timeout(240)
def test_tune_and_train_block_their_cells_and_the_view_redraws_in_place(
    tmp_path: Path,
) -> None:
    cells = [f"STORAGE = {str(tmp_path)!r}\n" + SETUP, SWEEP, TRAIN, ASK]
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(source) for source in cells]
    )
    client = Recording(notebook, timeout=200, kernel_name="python3")
    client.execute(cwd=str(tmp_path))

    sweep_outputs = notebook.cells[1].outputs
    assert "best x: 3 errors: 0" in text_of(sweep_outputs), sweep_outputs
    # One output area for the view, drawn as HTML and replaced while the trials ran.
    shown = [o for o in sweep_outputs if o["output_type"] == "display_data"]
    assert len(shown) == 1, sweep_outputs
    display_id = shown[0]["transient"]["display_id"] if "transient" in shown[0] else None
    updates = [
        m for m in client.messages
        if m["msg_type"] == "update_display_data"
        and (display_id is None or m["content"]["transient"]["display_id"] == display_id)
    ]
    running = [m for m in updates if "RUNNING" in m["content"]["data"]["text/html"]]
    assert len(running) >= 2, [m["content"]["data"]["text/html"][:200] for m in updates]
    final = shown[0]["data"]["text/html"]
    assert final.count("TERMINATED") >= 3 and "objective_" in final, final

    assert "world total: 3.0" in text_of(notebook.cells[2].outputs), notebook.cells[2].outputs
    assert text_of(notebook.cells[3].outputs).strip().endswith("HI")


LONG_SWEEP = """\
def slow(config):
    for step in range(600):
        time.sleep(0.1)
        tune.report({"score": step})

tuner = tune.Tuner(
    slow,
    param_space={"x": tune.grid_search([1, 2])},
    run_config=tune.RunConfig(storage_path=STORAGE, name="stopped"),
)
tuner.fit()
"""

AFTER = """\
print("CPU free:", ray.available_resources().get("CPU"))
print("restorable:", tune.Tuner.can_restore(STORAGE + "/stopped"))
ray.shutdown()
"""


class Interrupting(Recording):
    """Interrupts the kernel (Jupyter's stop button) once the view shows trials running."""

    interrupted = False
    pending: Any = None

    def process_message(self, msg: dict[str, Any], cell: Any, cell_index: int) -> Any:
        html = msg.get("content", {}).get("data", {}).get("text/html", "")
        if not self.interrupted and "2 RUNNING" in html:
            self.interrupted = True
            # The client's own loop runs this; the kernel manager's interrupt is async.
            self.pending = asyncio.get_running_loop().create_task(self.km.interrupt_kernel())
        return super().process_message(msg, cell, cell_index)


@pytest.mark.timeout(240)
def test_interrupting_the_kernel_stops_the_sweep_and_frees_its_resources(
    tmp_path: Path,
) -> None:
    cells = [f"STORAGE = {str(tmp_path)!r}\n" + SETUP, LONG_SWEEP, AFTER]
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(source) for source in cells]
    )
    client = Interrupting(notebook, timeout=200, kernel_name="python3", allow_errors=True)
    client.execute(cwd=str(tmp_path))

    assert client.interrupted
    errors = [o for o in notebook.cells[1].outputs if o["output_type"] == "error"]
    assert [e["ename"] for e in errors] == ["KeyboardInterrupt"], notebook.cells[1].outputs
    assert "Tuner.restore" in text_of(notebook.cells[1].outputs)
    after = text_of(notebook.cells[2].outputs)
    assert "CPU free: 2.0" in after and "restorable: True" in after, after
