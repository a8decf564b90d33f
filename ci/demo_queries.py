"""Asks a running hubdex server three questions through the official MCP client, then what
changed one file (`related`), where a function is called (`grep`) and which commit introduced
it (`grep` of the history), and prints the answers the way an agent would see them."""

import asyncio
import sys

from mcp import Client

QUERIES = [
    ("how is a snapshot published and LATEST moved", {}),
    ("verify sha256 of segment files before opening them", {}),
    ("reciprocal rank fusion of BM25 and embeddings", {"type": ["commit", "doc"]}),
]


async def main(url: str) -> None:
    async with Client(url, mode="2026-07-28", read_timeout_seconds=120) as client:
        tools = await client.list_tools()
        print(f"tools: {', '.join(t.name for t in tools.tools)}")
        for query, extra in QUERIES:
            result = await client.call_tool("search", {"query": query, "top_k": 3, **extra})
            answer = result.structured_content
            print(f"\n> search {query!r}  (snapshot {answer['snapshot']})")
            for i, r in enumerate(answer["results"], 1):
                where = r.get("path") or (r.get("commit_sha") or "")[:12]
                if r.get("line_start"):
                    where += f":{r['line_start']}-{r['line_end']}"
                print(f"  {i}. [{r['type']}] {r['title']}  ({where})")
                print(f"     rrf {r['score']:.4f}  bm25 rank {r['sparse_rank']}  dense rank {r['dense_rank']}")
                snippet = " ".join(r["snippet"].split())[:160]
                print(f"     {snippet}")
        result = await client.call_tool("related", {"id": "file/README.md", "kinds": "changed_in", "limit": 3})
        answer = result.structured_content
        print(f"\n> related file/README.md  (snapshot {answer['snapshot']})")
        for g in answer["groups"]:
            print(f"  {g['kind']} ({g['direction']}): {len(g['edges'])} of {g['count']}")
            for e in g["edges"]:
                print(f"    [{e['type']}] {e['title']}  ({e['entity'][7:19]}, {e['updated_at']})")
        result = await client.call_tool("grep", {"pattern": r"\bplan_merges\(", "limit": 5})
        answer = result.structured_content
        print(f"\n> grep '\\bplan_merges\\('  (snapshot {answer['snapshot']}): "
              f"{answer['count']} lines in {answer['files']} files of {answer['searched_files']}")
        for m in answer["results"]:
            print(f"  {m['path']}:{m['line']}: {m['text'].strip()[:120]}")
        args = {"pattern": r"fn plan_merges\(", "in": "history", "order": "oldest", "limit": 1}
        result = await client.call_tool("grep", args)
        answer = result.structured_content
        print(f"\n> grep --in history --order oldest 'fn plan_merges\\(': {answer['commits']} commits "
              f"changed such a line; the first:")
        for c in answer["results"]:
            print(f"  {c['commit_sha'][:12]} {c['committed_at'][:10]} {c['title']}")
            for line in c["lines"]:
                print(f"    {line['path']}: {line['change']}{line['text'].strip()[:110]}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
