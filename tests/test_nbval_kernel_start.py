"""notebooks/conftest.py: how `make test` starts each notebook's kernel under nbval."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

CONFTEST = Path(__file__).resolve().parents[1] / "notebooks" / "conftest.py"


@pytest.fixture
def starter() -> ModuleType:
    spec = importlib.util.spec_from_file_location("notebooks_conftest", CONFTEST)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_kernel_talks_over_ipc_in_a_directory_of_its_own(starter: ModuleType) -> None:
    km, kc = starter.start_new_kernel(kernel_name="python3", stderr=None)
    try:
        info = json.loads(Path(km.connection_file).read_text())
        assert info["transport"] == "ipc"  # no TCP port for two workers to race for
        assert Path(info["ip"]).parent.name.startswith("fanoutsim-kernel-")
        reply = kc.execute_interactive("x = 6 * 7", user_expressions={"x": "x"}, timeout=30)
        assert reply["content"]["user_expressions"]["x"]["data"]["text/plain"] == "42"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_a_kernel_that_does_not_start_is_retried_and_its_stderr_reported(
    starter: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[Path] = []

    def never_ready(timeout: float, name: str, sockets: Path, stderr: Any, **kwargs: Any) -> None:
        attempts.append(sockets)
        stderr.write(f"attempt {len(attempts)}: Address already in use\n")
        stderr.flush()
        raise RuntimeError("Kernel didn't respond in 60 seconds")

    monkeypatch.setattr(starter, "_start_once", never_ready)
    with (
        pytest.warns(starter.KernelStartRetried, match="attempt 1: Address already in use"),
        pytest.raises(RuntimeError, match=r"tried 2 times(.|\n)*attempt 2: Address already in use"),
    ):
        starter.start_new_kernel(kernel_name="python3")
    assert len(attempts) == 2 and attempts[0] != attempts[1]  # a fresh socket directory each time


def test_a_second_attempt_that_starts_is_used_and_the_first_failure_shown(
    starter: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[Path] = []

    def second_time_lucky(timeout: float, name: str, sockets: Path, stderr: Any, **kwargs: Any) -> tuple[str, str]:
        attempts.append(sockets)
        if len(attempts) == 1:
            raise RuntimeError("Kernel didn't respond in 60 seconds")
        return "km", "kc"

    monkeypatch.setattr(starter, "_start_once", second_time_lucky)
    with pytest.warns(starter.KernelStartRetried, match="kernel start 1 failed: Kernel didn't respond"):
        assert starter.start_new_kernel(kernel_name="python3") == ("km", "kc")
    assert len(attempts) == 2
