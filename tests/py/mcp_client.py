"""Drives a hubdex server with the official Python MCP client, calls every tool, and prints
one JSON report for the Rust test to assert on.

usage: mcp_client.py --mode (2026-07-28|legacy) (stdio -- CMD... | http URL)
"""

import argparse
import asyncio
import json

from mcp import Client, StdioServerParameters


def report(result):
    return {
        "is_error": bool(result.is_error),
        "structured": result.structured_content,
        "text": " ".join(getattr(c, "text", "") for c in result.content),
    }


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("transport", choices=["stdio", "http"])
    p.add_argument("target", nargs="+")
    p.add_argument("--mode", default="2026-07-28")
    a = p.parse_args()
    if a.transport == "stdio":
        server = StdioServerParameters(command=a.target[0], args=a.target[1:])
    else:
        server = a.target[0]
    async with Client(server, mode=a.mode, read_timeout_seconds=120) as client:
        tools = await client.list_tools()
        stats = report(await client.call_tool("index_stats", {}))
        repo = stats["structured"]["repos"][0]["repo"]
        search = report(await client.call_tool("search", {"query": "retry network calls with increasing delays", "top_k": 3}))
        scan = report(await client.call_tool("scan", {"since": "2000-01-01", "limit": 5}))
        first = search["structured"]["results"][0]["id"]
        fetch = report(await client.call_tool("fetch", {"ids": [first, "cmt_doesnotexist"]}))
        span = report(await client.call_tool("read_span", {"repo": repo, "path": "docs/guide.md", "start_line": 1, "end_line": 3}))
        related = report(await client.call_tool("related", {"id": "file/docs/guide.md", "kinds": "changed_in"}))
        grep = report(await client.call_tool("grep", {"pattern": "^## Creating (\\w+)", "context": 1}))
        bad = report(await client.call_tool("search", {"query": "x", "top_k": 500}))
        out = {
            "tools": sorted(t.name for t in tools.tools),
            "stats": stats, "search": search, "scan": scan, "fetch": fetch, "span": span, "related": related, "grep": grep, "bad": bad,
        }
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
