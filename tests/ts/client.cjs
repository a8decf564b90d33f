// Drives a hubdex server over streamable HTTP with the official MCP TypeScript SDK client,
// calls every tool, and prints one JSON report for the Rust test to assert on.
// usage: node client.cjs URL   (HUBDEX_NODE_DIR names where ci/setup installed the SDK)
const path = require("node:path");
const nodeDir = process.env.HUBDEX_NODE_DIR;
const sdk = (p) => require(require.resolve(`@modelcontextprotocol/sdk/${p}`, { paths: [nodeDir] }));
const { Client } = sdk("client/index.js");
const { StreamableHTTPClientTransport } = sdk("client/streamableHttp.js");

async function main() {
  const url = new URL(process.argv[2]);
  const client = new Client({ name: "hubdex-ts-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(url));
  const tools = (await client.listTools()).tools.map((t) => t.name).sort();
  const call = async (name, args) => {
    const r = await client.callTool({ name, arguments: args });
    return { isError: !!r.isError, structured: r.structuredContent ?? null, text: (r.content || []).map((c) => c.text || "").join(" ") };
  };
  const stats = await call("index_stats", {});
  const repo = stats.structured.repos[0].repo;
  const search = await call("search", { query: "retry network calls with increasing delays", top_k: 3 });
  const scan = await call("scan", { since: "2000-01-01", limit: 5 });
  const fetch = await call("fetch", { ids: [search.structured.results[0].id, "cmt_doesnotexist"] });
  const span = await call("read_span", { repo, path: "docs/guide.md", start_line: 1, end_line: 3 });
  const related = await call("related", { id: "file/docs/guide.md", kinds: "changed_in" });
  const grep = await call("grep", { pattern: "^## Creating (\\w+)", context: 1 });
  const bad = await call("search", { query: "x", top_k: 500 });
  console.log(JSON.stringify({ tools, protocol: client.transport?.protocolVersion ?? null, stats, search, scan, fetch, span, related, grep, bad }));
  await client.close();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
