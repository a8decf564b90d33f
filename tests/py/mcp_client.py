"""Drives a hubdex server with the official Python MCP client and prints one JSON report.

usage: mcp_client.py --mode (2026-07-28|legacy) --query TEXT (stdio -- CMD... | http URL)
The report holds the listed tools, the search answer's structured content, and the result of
a bad call (is_error and its text), so the Rust test asserts on what a real client saw.
"""

import argparse
import asyncio
import json
import sys

from mcp import Client, StdioServerParameters


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("transport", choices=["stdio", "http"])
    p.add_argument("target", nargs="+")
    p.add_argument("--mode", default="2026-07-28")
    p.add_argument("--query", required=True)
    a = p.parse_args()
    if a.transport == "stdio":
        server = StdioServerParameters(command=a.target[0], args=a.target[1:])
    else:
        server = a.target[0]
    async with Client(server, mode=a.mode, read_timeout_seconds=120) as client:
        tools = await client.list_tools()
        good = await client.call_tool("search", {"query": a.query, "top_k": 3})
        bad = await client.call_tool("search", {"query": a.query, "top_k": 500})
        report = {
            "tools": sorted(t.name for t in tools.tools),
            "search": {"is_error": good.is_error, "structured": good.structured_content},
            "bad": {
                "is_error": bad.is_error,
                "text": " ".join(getattr(c, "text", "") for c in bad.content),
            },
        }
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main())
