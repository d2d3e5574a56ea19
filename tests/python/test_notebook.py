"""examples/analyst.ipynb runs headless, top to bottom, without a cell error.

Executed with nbclient on the python3 kernel (installed with
`python -m ipykernel install --user` if missing), with the working directory
in a temporary folder. Skipped while `epistore serve` is not built, since the
notebook's Flight SQL section needs it.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO, epistore_bin, serve_available

_SERVE_OK, _SERVE_WHY = serve_available()
pytestmark = pytest.mark.skipif(not _SERVE_OK, reason=_SERVE_WHY or "epistore serve unavailable")

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("epistore", reason="the epistore package is not installed (cd python && maturin build --profile dev; pip install the wheel)")

NOTEBOOK = REPO / "examples" / "analyst.ipynb"
TIMEOUT = 300


def ensure_python3_kernel() -> None:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec("python3")
    except NoSuchKernel:
        subprocess.run([sys.executable, "-m", "ipykernel", "install", "--user"], check=True)


def test_analyst_notebook_runs(tmp_path, monkeypatch):
    ensure_python3_kernel()
    monkeypatch.setenv("EPISTORE_BIN", epistore_bin())
    monkeypatch.setenv("EPISTORE_DATASET", str(REPO / "datasets" / "login-validation"))
    monkeypatch.setenv("EPISTORE_NOTEBOOK_DIR", str(tmp_path))
    monkeypatch.setenv("EPISTORE_NOTEBOOK_REQUIRE_SERVE", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")

    before = sorted(p.name for p in NOTEBOOK.parent.iterdir())
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=TIMEOUT,
        kernel_name="python3",
        allow_errors=False,
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as err:
        pytest.fail(f"notebook cell failed:\n{err}")

    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, errors

    plot = tmp_path / "sound_completion_by_harness_level.png"
    assert plot.is_file(), sorted(p.name for p in tmp_path.iterdir())
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "export" / "manifest.json").is_file()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "serving on grpc://" in text, "the Flight SQL section did not run"
    assert "match epistore" in text
    # The notebook writes only into its working directory.
    assert sorted(p.name for p in NOTEBOOK.parent.iterdir()) == before
