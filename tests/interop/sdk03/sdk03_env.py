"""The official a2a-sdk 0.3 peer's own virtual environment, `.venv/peers/sdk03`, built from
requirements.txt beside this file (tests/interop/peer_env.py says how and when).

The project's .venv pins the SDK 1.x, and both generations own the `a2a` package.

    .venv/bin/python -m tests.interop.sdk03.sdk03_env   # builds it if needed, prints its python
"""

from __future__ import annotations

from pathlib import Path

from tests.interop.peer_env import PeerEnv, main

SDK03 = PeerEnv("sdk03", Path(__file__).resolve().parent)

if __name__ == "__main__":
    main(SDK03)
