"""How nbval starts a notebook's kernel in `make test`.

nbval's own start picks TCP ports by binding port 0 and letting go, then the
kernel binds them: two xdist workers starting kernels at once (or a test's
server taking an ephemeral port between the two steps) can leave a kernel that
never answers, which nbval reports as "Kernel didn't respond in 60 seconds"
for every cell of that notebook. Here each kernel talks over IPC sockets in a
directory of its own (no port to race for), its stderr is kept rather than
thrown away, and a kernel that still fails to start is reported with what it
wrote and started once more.
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

import pytest
from jupyter_client import KernelClient, KernelManager
from nbval import kernel as nbval_kernel

START_ATTEMPTS = 2
_SOCKET_DIRS: list[Path] = []
_ORIGINAL = pytest.StashKey[Any]()


class KernelStartRetried(UserWarning):
    """A notebook's kernel did not start at the first attempt: pytest's warnings
    summary shows it (with what the kernel wrote) even when the retry passes."""


def _start_once(
    startup_timeout: float, kernel_name: str, sockets: Path, **kwargs: Any
) -> tuple[KernelManager, KernelClient]:
    km = KernelManager(
        kernel_name=kernel_name,
        kernel_spec_manager=nbval_kernel.NbvalKernelspecManager(),
        transport="ipc",
        ip=str(sockets / "kernel"),
    )
    km.start_kernel(**kwargs)
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=startup_timeout)
    except RuntimeError:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        raise
    return km, kc


def start_new_kernel(
    startup_timeout: float = 60, kernel_name: str = "python", **kwargs: Any
) -> tuple[KernelManager, KernelClient]:
    """nbval's `start_new_kernel`, over IPC, with its stderr kept and one retry."""
    kwargs.pop("stderr", None)  # nbval passes /dev/null; keep what a failing kernel says
    for attempt in range(1, START_ATTEMPTS + 1):
        sockets = Path(tempfile.mkdtemp(prefix="fanoutsim-kernel-"))
        _SOCKET_DIRS.append(sockets)
        stderr_path = sockets / "stderr.txt"
        with stderr_path.open("w") as stderr:
            try:
                return _start_once(startup_timeout, kernel_name, sockets, stderr=stderr, **kwargs)
            except RuntimeError as exc:
                said = stderr_path.read_text(errors="replace")[-2000:]
                if attempt == START_ATTEMPTS:
                    raise RuntimeError(f"{exc} (tried {START_ATTEMPTS} times); the kernel's stderr:\n{said}") from exc
                warnings.warn(
                    KernelStartRetried(f"kernel start {attempt} failed: {exc}; its stderr:\n{said}"), stacklevel=2
                )
    raise AssertionError("unreachable")


def pytest_configure(config: pytest.Config) -> None:
    # nbval starts a notebook's kernel in its file's setup, before any fixture
    # runs: the swap is made when pytest starts
    config.stash[_ORIGINAL] = nbval_kernel.start_new_kernel
    nbval_kernel.start_new_kernel = start_new_kernel


def pytest_unconfigure(config: pytest.Config) -> None:
    nbval_kernel.start_new_kernel = config.stash.get(_ORIGINAL, nbval_kernel.start_new_kernel)
    for sockets in _SOCKET_DIRS:
        shutil.rmtree(sockets, ignore_errors=True)
