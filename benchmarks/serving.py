"""The live page's speed: `ctxembed serve` endpoint latency and the time from a keystroke to a redrawn matrix
in Chromium. Run by ``benchmarks/run.py --only serve``, or alone: ``.venv/bin/python benchmarks/serving.py``.

Endpoint: one `ctxembed serve --port 0` process on the default vectors; 200 sentences of the Brown example
corpus (its first lines of 3 to 60 words, real text with punctuation) are POSTed to /api/attend one after
the other on one keep-alive connection, as the page sends them, after 20 warm-up requests; latency is the
wall time from sending the request to reading the whole answer, JSON included. The same for /api/compare
(pairs of those sentences, every word they share) and for 20 threads at once.

Browser: Debian's headless Chromium (Playwright) on the page; a character is typed at the end of a
24-token sentence, 40 times, and the figure is the page's own performance.now() from the keydown to the
end of the redraw (the page waits 120 ms after the last keystroke before asking: the debounce is part of
the figure, as a person feels it). Target: ≤ 300 ms (issue 27).

Also, in this process: what a fresh Explorer costs beside an attend answer on a cached one, the reason
the server keeps one Explorer per settings behind a lock rather than building one per request.
"""

from __future__ import annotations

import gzip
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

SENTENCES = 200
WARM = 20
KEYSTROKES = 40
TYPED = "the fisherman sat on the muddy river bank and watched the slow water while his friend walked to the bank"
ENDPOINT_TARGET = 0.050  # seconds, p95 of /api/attend: a fifth of the keystroke budget
KEYSTROKE_TARGET = 0.300  # seconds, median keystroke -> redrawn matrix (issue 27)


def brown_sentences(repo: Path, n: int) -> list[str]:
    found = []
    with gzip.open(repo / "data" / "brown.txt.gz", "rt", encoding="utf-8") as source:
        for line in source:
            words = line.split()
            if 3 <= len(words) <= 60:
                found.append(line.strip())
            if len(found) == n:
                break
    return found


def start(ctxembed: str, env: dict) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen(
        [ctxembed, "serve", "--port", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True
    )
    line = process.stderr.readline()
    match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    if not match:
        process.kill()
        raise RuntimeError(f"ctxembed serve did not start: {line}{process.stderr.read()}")
    threading.Thread(target=process.stderr.read, daemon=True).start()  # keep its stderr drained
    return process, int(match.group(1))


def timed_posts(port: int, path: str, bodies: list[dict]) -> list[float]:
    """Seconds per request, one keep-alive connection, in order."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    times = []
    for body in bodies:
        data = json.dumps(body).encode()
        t0 = time.perf_counter()
        connection.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = response.read()
        times.append(time.perf_counter() - t0)
        if response.status != 200:
            raise RuntimeError(f"{path} {body}: {response.status} {answer[:200]!r}")
    connection.close()
    return times


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def figures(values: list[float]) -> dict:
    return {
        "median": statistics.median(values),
        "p95": percentile(values, 0.95),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def ms(s: dict) -> str:
    return f"median {s['median'] * 1e3:.1f} ms, p95 {s['p95'] * 1e3:.1f} ms (max {s['max'] * 1e3:.0f})"


def endpoint_latency(port: int, sentences: list[str]) -> dict:
    timed_posts(port, "/api/attend", [{"sentence": s} for s in sentences[:WARM]])
    attend = timed_posts(port, "/api/attend", [{"sentence": s} for s in sentences])
    pairs = [
        {"sentences": [a, b]}
        for a, b in zip(sentences[::2], sentences[1::2], strict=False)
        if {w for w in a.lower().split() if w.isalpha() and len(w) > 1} & set(b.lower().split())
    ]
    compare = timed_posts(port, "/api/compare", pairs)  # every word the two share
    concurrent: list[float] = []
    lock = threading.Lock()

    def worker(chunk):
        found = timed_posts(port, "/api/attend", [{"sentence": s} for s in chunk])
        with lock:
            concurrent.extend(found)

    threads = [threading.Thread(target=worker, args=(sentences[k::20],)) for k in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"attend": figures(attend), "compare": figures(compare), "attend_20_threads": figures(concurrent)}


def keystrokes(port: int) -> dict | None:
    """Keydown -> redrawn matrix in Chromium, as the page measures it; None without chromium or Playwright."""
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if executable is None:
        return None
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"http://127.0.0.1:{port}/")
        page.wait_for_selector("table.matrix td")
        page.fill("#sentence", TYPED)
        wait(page, "!window.ctxembedLive.busy")
        samples = []
        for _ in range(KEYSTROKES):
            before = page.evaluate("window.ctxembedLive.draws")
            page.locator("#sentence").press("End")
            page.keyboard.type("s")
            wait(page, f"window.ctxembedLive.draws > {before} && !window.ctxembedLive.busy")
            samples.append(page.evaluate("(window.ctxembedLive.drawnAt - window.ctxembedLive.keyAt) / 1000"))
            page.locator("#sentence").press("Backspace")
            wait(page, "!window.ctxembedLive.busy")
            time.sleep(0.05)
        tokens = page.locator("table.matrix th.row").count()
        browser.close()
    return figures(samples) | {"tokens": tokens}


def fresh_or_locked() -> dict:
    """Why one locked Explorer per settings and not one per request: what building one costs beside an
    attend answer on a cached one (in this process, the store already open, as in the server)."""
    from ctxembed.api import Explorer
    from ctxembed.serve.endpoints import Explorers, answer

    Explorer()  # opens the store: once per server either way
    build = []
    for _ in range(20):
        t0 = time.perf_counter()
        Explorer()
        build.append(time.perf_counter() - t0)
    explorers = Explorers()
    body = {"sentence": "the fisherman sat on the muddy river bank"}
    answer("attend", body, explorers)
    answers = []
    for _ in range(200):
        t0 = time.perf_counter()
        answer("attend", body, explorers)
        answers.append(time.perf_counter() - t0)
    return {"build": figures(build), "answer": figures(answers)}


def wait(page, expression: str, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while not page.evaluate(expression):
        if time.monotonic() > end:
            raise TimeoutError(expression)
        time.sleep(0.005)


def serving(ctxembed: str, env: dict, repo: Path) -> tuple[list[tuple], dict]:
    """Rows (job, ctxembed, reference, ratio, target, met) and the samples."""
    sentences = brown_sentences(repo, SENTENCES)
    process, port = start(ctxembed, env)
    try:
        latency = endpoint_latency(port, sentences)
        typing = keystrokes(port)
    finally:
        process.terminate()
        process.wait(30)
    costs = fresh_or_locked()
    attend = latency["attend"]
    rows = [
        (
            f"serve: POST /api/attend, {SENTENCES} Brown sentences (3-60 words), one connection",
            ms(attend),
            "",
            "",
            f"p95 ≤ {ENDPOINT_TARGET * 1e3:.0f} ms",
            attend["p95"] <= ENDPOINT_TARGET,
        ),
        ("serve: POST /api/compare, pairs of those sentences", ms(latency["compare"]), "", "", "", None),
        ("serve: POST /api/attend, 20 threads at once", ms(latency["attend_20_threads"]), "", "", "", None),
    ]
    build, answer = costs["build"]["median"], costs["answer"]["median"]
    rows.append(
        (
            "serve: a fresh Explorer per request, against an 8-token attend answer on a cached (locked) one",
            f"Explorer() {build * 1e3:.1f} ms; answer {answer * 1e3:.2f} ms (medians)",
            "",
            f"{build / answer:.0f}x",
            "",
            None,
        )
    )
    if typing is None:
        rows.append(("serve: keystroke -> redrawn matrix in Chromium", "skipped: no chromium", "", "", "", None))
    else:
        rows.append(
            (
                f"serve: keystroke -> redrawn matrix in Chromium, {typing['tokens']} tokens (120 ms debounce included)",
                ms(typing),
                "",
                "",
                f"median ≤ {KEYSTROKE_TARGET * 1e3:.0f} ms",
                typing["median"] <= KEYSTROKE_TARGET,
            )
        )
    return rows, {"latency": latency, "keystrokes": typing, "fresh_or_locked": costs}


if __name__ == "__main__":
    repo = Path(__file__).resolve().parent.parent
    command = str(Path(sys.executable).parent / "ctxembed")
    found_rows, details = serving(command, dict(os.environ), repo)
    for row in found_rows:
        print(" | ".join(str(cell) for cell in row))
    print(json.dumps(details, indent=2))
