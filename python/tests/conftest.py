"""Fixtures of the nibble package's tests.

Environment (tests/cli/python.sh sets it from ctest's):
  NIBBLE_MODELS_DIR  the test models (default: ../shared/models beside the checkout)
  NIBBLE_SOURCE_DIR  the checkout (default: two folders up), for models/phone-agent-tiny
  NIBBLE_BIN         the nibble CLI the greedy text is compared with
  NIBBLE_LIB         the libnibble.so under test (else the package's own search)
A missing model or CLI skips the tests that need it, except under CI=true, where it fails.
"""

import os
import subprocess

import pytest

import nibble

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("NIBBLE_SOURCE_DIR") or os.path.normpath(os.path.join(HERE, "..", ".."))
MODELS = os.environ.get("NIBBLE_MODELS_DIR") or os.path.join(SOURCE, "..", "shared", "models")
CI = os.environ.get("CI") == "true"


def need(path, what):
    if path and os.path.exists(path):
        return path
    msg = f"{what} not found ({path})"
    if CI:
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture(scope="session")
def kjv_path():
    return need(os.path.join(MODELS, "kjv-7m", "kjv-7m-f32.gguf"), "kjv-7m")


@pytest.fixture(scope="session")
def agent_path():
    return need(os.path.join(SOURCE, "models", "phone-agent-tiny", "phone-agent-tiny-f32.gguf"),
                "phone-agent-tiny")


@pytest.fixture(scope="session")
def kjv(kjv_path):
    """kjv-7m as stored (f32), two threads (the CLI tests' -t 2)."""
    with nibble.Model(kjv_path, weights="source", n_threads=2) as m:
        yield m


@pytest.fixture(scope="session")
def agent(agent_path):
    with nibble.Model(agent_path, weights="source", n_threads=2) as m:
        yield m


@pytest.fixture(scope="session")
def cli():
    """cli(args..., stdin=None, env=None) -> stdout of the nibble CLI (exit 0 checked)."""
    binary = need(os.environ.get("NIBBLE_BIN"), "the nibble CLI (NIBBLE_BIN)")

    def run(*args, stdin=None, env=None):
        e = dict(os.environ)
        # the CLI is a program of its own: a sanitizer runtime preloaded for this Python
        # (tests/cli/python.sh, dev preset) must not be loaded into it a second time
        e.pop("LD_PRELOAD", None)
        e.update(env or {})
        r = subprocess.run([binary, *args], input=stdin, capture_output=True, env=e)
        assert r.returncode == 0, r.stderr.decode("utf-8", "replace")
        return r.stdout.decode("utf-8")
    return run
