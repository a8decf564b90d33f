"""Times search calls through the official MCP client over HTTP (each includes the server's
query embedding): prints p50, p95 and mean per fusion, or one JSON object with --json.

usage: latency.py URL N [--json]
"""

import asyncio
import json
import statistics
import sys
import time

from mcp import Client

QUERIES = [
    "how is a snapshot published", "verify checksums", "reciprocal rank fusion", "markdown headings",
    "commit diff cut at 200 lines", "ONNX runtime embedding", "object store conditional update",
    "tool argument errors", "stop words in BM25", "python MCP client test",
]


async def main(url: str, n: int, as_json: bool) -> None:
    out = {}
    async with Client(url, mode="2026-07-28", read_timeout_seconds=120) as client:
        for fusion in ["sparse_only", "dense_only", "rrf"]:
            times = []
            for i in range(n):
                q = QUERIES[i % len(QUERIES)]
                t = time.perf_counter()
                r = await client.call_tool("search", {"query": q, "fusion": fusion})
                times.append((time.perf_counter() - t) * 1000)
                assert not r.is_error, r
            times.sort()
            pick = lambda p: times[round((len(times) - 1) * p)]
            out[fusion] = {"p50_ms": pick(0.5), "p95_ms": pick(0.95), "p99_ms": pick(0.99),
                           "mean_ms": statistics.mean(times), "n": n}
            if not as_json:
                print(f"  {fusion:12s} p50 {pick(0.5):6.2f} ms   p95 {pick(0.95):6.2f} ms   mean {statistics.mean(times):6.2f} ms")
    if as_json:
        print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), "--json" in sys.argv[3:]))
