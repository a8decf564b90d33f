"""Calls tools on a hubdex HTTP server with the official Python MCP client and a bearer token,
and prints one JSON report per call for the Rust test to assert on.

usage: mcp_calls.py URL TOKEN '[["tool", {args}], ...]'
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main() -> None:
    url, token, calls = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    out = []
    async with http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, read_timeout_seconds=120) as client:
            for name, args in calls:
                r = await client.call_tool(name, args)
                out.append({
                    "is_error": bool(r.is_error),
                    "structured": r.structured_content,
                    "text": " ".join(getattr(c, "text", "") for c in r.content),
                })
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
