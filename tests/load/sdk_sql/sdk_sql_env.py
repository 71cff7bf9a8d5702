"""The SQL anchor's own virtual environment, `.venv/peers/sdk-sql`: the official a2a-sdk 1.3.0
with its `postgresql` extra (SQLAlchemy, asyncpg), built from requirements.txt beside this file
(tests/interop/peer_env.py says how and when).

    .venv/bin/python -m tests.load.sdk_sql.sdk_sql_env   # builds it if needed, prints its python
"""

from __future__ import annotations

from pathlib import Path

from tests.interop.peer_env import PeerEnv, main

SDK_SQL = PeerEnv("sdk-sql", Path(__file__).resolve().parent)

if __name__ == "__main__":
    main(SDK_SQL)
