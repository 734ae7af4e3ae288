// The TypeScript SDK's client with a bearer token: list the tools of the MCP server at argv[2],
// call the tool argv[4] (if given), print {"tools": [...], "result": ...} as JSON.
// The token comes from MCP_BEARER_TOKEN, so it never appears on a command line.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, , tool] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${process.env.MCP_BEARER_TOKEN}` };
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: 'ts-sdk-bearer', version: '1.0.0' });
try {
  await client.connect(transport);
  const tools = (await client.listTools()).tools.map((t) => t.name).sort();
  const result = tool ? await client.callTool({ name: tool, arguments: {} }) : null;
  console.log(JSON.stringify({ tools, result }));
  await client.close();
} catch (err) {
  console.log(JSON.stringify({ error: String(err && err.message ? err.message : err), code: err && err.code }));
  process.exitCode = 1;
}
