// A host on the official TypeScript SDK client, driven by mcpserver's
// TypeScript tests: it connects to Plexus (Streamable HTTP with a bearer,
// or a command over stdio), lists the tools, calls the tools it is told to
// and answers sampling requests as a model would. It prints one JSON line:
// the tool names, each call's result and the sampling requests it saw.
//
//   node ts-host.mjs http <url> <pat> <calls.json>
//   node ts-host.mjs stdio <calls.json> <command> [args...]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { CreateMessageRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { readFileSync } from "node:fs";

const [mode, ...rest] = process.argv.slice(2);
let transport, callsFile;
if (mode === "http") {
  const [url, pat, file] = rest;
  callsFile = file;
  transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${pat}` } },
  });
} else if (mode === "stdio") {
  const [file, command, ...args] = rest;
  callsFile = file;
  transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
} else {
  console.error("usage: ts-host.mjs http <url> <pat> <calls.json> | stdio <calls.json> <command> [args...]");
  process.exit(2);
}
const calls = JSON.parse(readFileSync(callsFile, "utf8"));

const sampled = [];
const client = new Client({ name: "ts-host", version: "1.0.0" }, { capabilities: { sampling: {} } });
client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
  const q = req.params.messages[0].content.text;
  sampled.push(q);
  return { role: "assistant", model: "ts-model", content: { type: "text", text: "42 for " + q } };
});

await client.connect(transport);
const tools = (await client.listTools()).tools.map((t) => t.name);
const results = [];
for (const c of calls) {
  results.push(await client.callTool({ name: c.name, arguments: c.arguments ?? {} }));
}
await client.close();
console.log(JSON.stringify({ tools, results, sampled }));
