"""Times search calls through the official MCP client: prints p50, p95 and mean per fusion."""

import asyncio
import statistics
import sys
import time

from mcp import Client

QUERIES = [
    "how is a snapshot published", "verify checksums", "reciprocal rank fusion", "markdown headings",
    "commit diff cut at 200 lines", "ONNX runtime embedding", "object store conditional update",
    "tool argument errors", "stop words in BM25", "python MCP client test",
]


async def main(url: str, n: int) -> None:
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
            p95 = times[int(0.95 * len(times)) - 1]
            print(f"  {fusion:12s} p50 {statistics.median(times):6.2f} ms   p95 {p95:6.2f} ms   mean {statistics.mean(times):6.2f} ms")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
