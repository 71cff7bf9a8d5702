"""The Google ADK peer's own virtual environment, `.venv/peers/adk`, built from requirements.txt
beside this file (tests/interop/peer_env.py says how and when).

google-adk brings its own a2a-sdk, so it never goes into the project's .venv.

    .venv/bin/python -m tests.interop.adk.adk_env   # builds it if needed, prints its python

(Not named venv.py: `python -m venv` run from this folder would import it instead of the
standard library's.)
"""

from __future__ import annotations

from pathlib import Path

from tests.interop.peer_env import NoNetworkError, PeerEnv, PeerEnvError, main

__all__ = ["ADK", "AdkVenvError", "NoNetworkError", "ensure_adk_python"]

ADK = PeerEnv("adk", Path(__file__).resolve().parent)
AdkVenvError = PeerEnvError


def ensure_adk_python() -> Path:
    """The ADK environment's python, built first if it is missing or its pins changed."""
    return ADK.ensure()


if __name__ == "__main__":
    main(ADK)
