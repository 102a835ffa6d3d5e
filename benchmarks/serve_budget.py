"""The heaviest requests the cost budget admits, against a real `ctxembed serve`: the server's peak memory
and each answer's time, with a light request sent while each heavy one runs (issue 33's 'Done when').

    .venv/bin/python benchmarks/serve_budget.py

Prints one line per heavy request: its status, seconds, the server's peak RSS (VmHWM) so far, and the
light request's seconds. Run it on a quiet machine: the figures are wall-clock."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time

WORDS = "the river bank where we sat and watched boats go by".split()


def sentence(tokens: int, shift: int = 0) -> str:
    return " ".join(WORDS[(i + shift) % len(WORDS)] for i in range(tokens))


HEAVY = {  # endpoint, body: each near one of the budget's limits (docs/robustness.md)
    "attend, 512 tokens x 4 heads, random projections d_out 1024": (
        "attend",
        {"sentence": sentence(512), "heads": 4, "projection": "random", "d_out": 1024, "mix": "off"},
    ),
    "explain, 512 tokens x 2 heads": ("explain", {"sentence": sentence(512), "heads": 2, "mix": "off"}),
    "explain drawn (?as=terminal), 80 tokens x 4 heads": (
        "explain?as=terminal",
        {"sentence": sentence(80), "heads": 4, "mix": "off"},
    ),
    "compare, 32 sentences x 512 tokens, 1 head, random d_out 32": (
        "compare",
        {
            "sentences": [sentence(512, n) for n in range(32)],
            "heads": 1,
            "projection": "random",
            "d_out": 32,
            "mix": "off",
        },
    ),
    "neighbors, 512 tokens x 4 heads x 8 layers": (
        "neighbors",
        {"sentence": sentence(512), "word": "bank", "heads": 4, "layers": 8, "mix": "off"},
    ),
    "compare, 2 x 512 tokens, 20 heads, 48 layers (refused)": (
        "compare",
        {"sentences": [sentence(512), sentence(512, 1)], "heads": 20, "layers": 48},
    ),
}


def post(port: int, endpoint: str, body: dict) -> tuple[int, float, str]:
    started = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    connection.request("POST", f"/api/{endpoint}", json.dumps(body), {"Content-Type": "application/json"})
    response = connection.getresponse()
    text = response.read()
    connection.close()
    error = json.loads(text)["error"] if response.status >= 400 else ""
    return response.status, time.monotonic() - started, error


def peak_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "ctxembed", "serve", "--port", "0"], stderr=subprocess.PIPE, text=True
    )
    try:
        port = int(server.stderr.readline().split("http://127.0.0.1:")[1].split("/")[0])
        threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()
        post(port, "attend", {"sentence": "the river bank"})
        print(f"started: peak {peak_mb(server.pid):.0f} MB")
        for name, (endpoint, body) in HEAVY.items():
            answer = {}
            heavy = threading.Thread(target=lambda a=answer, e=endpoint, b=body: a.update(result=post(port, e, b)))
            heavy.start()
            time.sleep(0.3)  # the heavy one is running
            _, light, _ = post(port, "attend", {"sentence": "we sat on the river bank"})
            heavy.join()
            status, seconds, error = answer["result"]
            print(f"{name}: {status} in {seconds:.2f} s; peak {peak_mb(server.pid):.0f} MB; light {light:.3f} s")
            if error:
                print(f"  {error}")
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
