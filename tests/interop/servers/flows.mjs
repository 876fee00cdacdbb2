// The question flows of flows.json as a step function, for the TypeScript test servers.
// servers/py_server.py implements the same steps in Python, so a client test can run
// against either server and expect the same answer text.
import { readFileSync } from 'node:fs';

const FLOWS = JSON.parse(readFileSync(new URL('./flows.json', import.meta.url), 'utf8'));

export const FLOW_NAMES = Object.keys(FLOWS).filter((name) => !name.startsWith('_'));

export function flowDescription(name) {
  return FLOWS[name].description;
}

/** The flow's rounds with its placeholders filled in: [{key: question}], one entry a round. */
export function roundsOf(name, args) {
  const flow = FLOWS[name];
  const fill = (text, round) => text.replaceAll('{hint}', String(args.hint ?? '')).replaceAll('{round}', String(round));
  const expand = (round, index, suffix) =>
    Object.fromEntries(
      Object.entries(round).map(([key, q]) => [`${key}${suffix}`, { ...q, message: fill(q.message, index + 1) }]),
    );
  if (flow.repeat_arg) {
    const times = Number(args[flow.repeat_arg] ?? 1);
    return Array.from({ length: times }, (_, i) => expand(flow.rounds[0], i, `-${i + 1}`));
  }
  return flow.rounds.map((round, i) => expand(round, i, ''));
}

/** The text a server answers with once a flow ends. */
export function outcomeText(tool, outcome) {
  return JSON.stringify({ tool, ...outcome });
}

/**
 * One MRTR step. `progress` is what the server carried in its requestState
 * ({answers, round}: `round` rounds asked so far), `responses` the client's
 * inputResponses for the last round asked. Returns {ask: {key: question}, progress}
 * for the next round, or {done: {answers} | {stopped}} when the flow is over.
 */
export function step(rounds, progress, responses) {
  const answers = { ...progress.answers };
  if (progress.round > 0) {
    for (const key of Object.keys(rounds[progress.round - 1])) {
      const response = responses?.[key];
      if (!response) return { done: { error: `no answer for ${key}` } };
      if (response.action !== 'accept') return { done: { stopped: { key, action: response.action } } };
      answers[key] = response.content ?? null;
    }
  }
  if (progress.round >= rounds.length) return { done: { answers } };
  return { ask: rounds[progress.round], progress: { answers, round: progress.round + 1 } };
}

export function encodeState(progress) {
  return Buffer.from(JSON.stringify(progress)).toString('base64url');
}

export function decodeState(text) {
  if (text === undefined) return { answers: {}, round: 0 };
  return JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
}
