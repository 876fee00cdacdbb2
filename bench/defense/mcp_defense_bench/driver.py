#!/usr/bin/env python3
"""The Python side of the mcp-defense-bench adapter (adapter.mjs starts it once).

Reads one JSON object a line on stdin, `{"input": …, "case": {"fixture": …,
"benignControl": …}}`, plays the input through a fresh gateway and scripted
servers (scenarios.py), and writes one line: `{"detect", "enforce", "signal"}`,
or `{"error": …}` when the harness itself failed (the adapter then throws: a
harness failure is never scored as a miss).
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scenarios  # noqa: E402


def main() -> int:
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            answer = scenarios.assess(request["input"], request.get("case") or {})
        except Exception as e:  # noqa: BLE001 - reported to the adapter, which fails the run
            answer = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-4000:]}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    if scenarios._certs is not None:
        scenarios._certs.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
