"""The Python SDK server of py_server.py (mcp 2.3.0: the flows of flows.json and
`echo`) over stdio, as a program people run locally: it speaks 2026-07-28
(`server/discover`, questions as `input_required`) and 2025-11-25 (`initialize`,
questions pushed) on its stdin and stdout.

    python py_stdio_server.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from py_server import build  # noqa: E402

if __name__ == "__main__":
    anyio.run(build().run_stdio_async)
