// A 2026-07-28 MCP server built on the TypeScript SDK v2 (@modelcontextprotocol/server):
// every flow of flows.json as a tool that asks through `input_required` (MRTR).
//
//   node ts_v2_server.mjs            listens on 127.0.0.1, a port the OS picks
// prints "listening http://127.0.0.1:PORT/mcp" once it accepts connections.
import http from 'node:http';
import { McpServer, createMcpHandler, inputRequired } from '@modelcontextprotocol/server';
import { toNodeHandler } from '@modelcontextprotocol/node';
import * as z from 'zod';
import { FLOW_NAMES, flowDescription, roundsOf, step, outcomeText, encodeState, decodeState } from './flows.mjs';

const ARGUMENTS = {
  book: z.object({ hint: z.string() }),
  endless: z.object({ rounds: z.number().int().min(1).max(50) }),
};

function asInputRequest(question) {
  if (question.url) return inputRequired.elicitUrl({ message: question.message, url: question.url });
  return inputRequired.elicit({ message: question.message, requestedSchema: question.schema });
}

function flowTool(name) {
  return async (args, ctx) => {
    const rounds = roundsOf(name, args);
    const progress = decodeState(ctx.mcpReq.requestState());
    const token = ctx.mcpReq._meta?.progressToken;
    if (token !== undefined) {
      // A notification before the result turns the answer into an event stream.
      await ctx.mcpReq.notify({
        method: 'notifications/progress',
        params: { progressToken: token, progress: progress.round + 1, message: 'thinking' },
      });
    }
    const result = step(rounds, progress, ctx.mcpReq.inputResponses);
    if (result.done) return { content: [{ type: 'text', text: outcomeText(name, result.done) }] };
    const inputRequests = Object.fromEntries(Object.entries(result.ask).map(([key, q]) => [key, asInputRequest(q)]));
    return inputRequired({ inputRequests, requestState: encodeState(result.progress) });
  };
}

function factory() {
  const server = new McpServer({ name: 'portcullis-interop-ts-v2', version: '1.0.0' });
  for (const name of FLOW_NAMES) {
    server.registerTool(
      name,
      { description: flowDescription(name), inputSchema: ARGUMENTS[name] ?? z.object({}) },
      flowTool(name),
    );
  }
  server.registerTool(
    'echo',
    { description: 'Answers with its text.', inputSchema: z.object({ text: z.string() }) },
    async ({ text }) => ({ content: [{ type: 'text', text }] }),
  );
  return server;
}

const listener = http.createServer(toNodeHandler(createMcpHandler(factory)));
listener.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  console.log(`listening http://127.0.0.1:${listener.address().port}/mcp`);
});
