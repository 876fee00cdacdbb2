// Book a room through the Portcullis demo with the official MCP TypeScript SDK
// (@modelcontextprotocol/client 2.x). The server asks which room "the big room"
// means; the elicitation handler shows the question and reads the answer.
import { createInterface } from 'node:readline';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const url = process.argv[2] ?? 'http://127.0.0.1:8080/mcp/rooms';
const terminal = createInterface({ input: process.stdin });
const lines = terminal[Symbol.asyncIterator]();
async function ask(prompt) {
  process.stdout.write(prompt);
  const { value } = await lines.next();
  return (value ?? '').trim();
}

const client = new Client(
  { name: 'book-room-example', version: '1.0.0' },
  { capabilities: { elicitation: { form: {} } } },
);
client.setRequestHandler('elicitation/create', async ({ params }) => {
  console.log(params.message);
  const content = {};
  for (const [field, schema] of Object.entries(params.requestedSchema.properties)) {
    const options = schema.enum ? ` [${schema.enum.join(', ')}]` : '';
    content[field] = await ask(`${field}${options}: `);
  }
  return { action: 'accept', content };
});

await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const { tools } = await client.listTools();
console.log('tools:', tools.map((t) => t.name).join(', '));
const result = await client.callTool({
  name: 'book_room',
  arguments: { day: '2026-09-17', hour: 9, room_hint: 'the big room' },
});
console.log(result.content[0].text);
await client.close();
terminal.close();
