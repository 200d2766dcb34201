// Drives an a2a-functions server with the official JS SDK's 0.3 client (@a2a-js/sdk 0.3.x), as
// a user of that release would: node client03.mjs <base url> <JSONRPC|HTTP+JSON> <webhook url>.
// Prints one JSON line per step: {"step": ..., ...}.
import { randomUUID } from 'node:crypto';
import { ClientFactory, ClientFactoryOptions } from '@a2a-js/sdk/client';

const [url, transport, hook] = process.argv.slice(2);
const say = (step, fields) => console.log(JSON.stringify({ step, ...fields }));
const message = (text, task) => ({
  message: {
    kind: 'message',
    messageId: randomUUID(),
    role: 'user',
    parts: [{ kind: 'text', text }],
    ...(task ? { taskId: task.id, contextId: task.contextId } : {}),
  },
});
// What the client raised: its typed error's name, or the message of a plain Error.
const failure = (error) => ({ error: error.constructor.name, message: String(error.message) });
const event = (ev) => ({
  kind: ev.kind,
  state: ev.status ? ev.status.state : null,
  id: ev.kind === 'task' ? ev.id : ev.taskId,
});

// Every request the client makes (its transports call the global fetch), to show which
// binding it spoke.
const sent = [];
globalThis.fetch = ((real) => (input, init) => {
  const path = new URL(input).pathname;
  if (!path.endsWith('agent-card.json')) {
    const rpc = init?.method === 'POST' && !path.includes('/v1/');
    sent.push(rpc ? JSON.parse(init.body).method : `${init?.method ?? 'GET'} ${path}`);
  }
  return real(input, init);
})(globalThis.fetch);

const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    preferredTransports: [transport],
  })
);
const client = await factory.createFromUrl(url);
const card = await client.getAgentCard();
say('card', {
  name: card.name,
  interfaces: (card.additionalInterfaces ?? []).map((i) => [i.transport, i.url]),
});
const done = await client.sendMessage(message('héllo'));
say('send', { kind: done.kind, state: done.status.state, text: done.artifacts[0].parts[0].text });

const waiting = await client.sendMessage(message('I would like a new phone'));
const got = await client.getTask({ id: waiting.id, historyLength: 1 });
say('get', { state: got.status.state, history: (got.history ?? []).length });

const canceled = await client.cancelTask({ id: waiting.id });
say('cancel', { state: canceled.status.state });
for (const [step, call] of [
  ['cancel-again', () => client.cancelTask({ id: waiting.id })],
  ['get-unknown', () => client.getTask({ id: 'no-such-task' })],
]) {
  try {
    await call();
    say(step, { refused: false });
  } catch (error) {
    say(step, failure(error));
  }
}

const streamed = [];
for await (const ev of client.sendMessageStream(message('I would like a new phone'))) streamed.push(ev);
say('stream', { events: streamed.map(event) });
const phone = streamed[0];

const config = (id) => ({ taskId: phone.id, pushNotificationConfig: { id, url: hook, token: 'tok' } });
const created = await client.setTaskPushNotificationConfig(config('cfg'));
await client.setTaskPushNotificationConfig(config('other'));
const read = await client.getTaskPushNotificationConfig({ id: phone.id, pushNotificationConfigId: 'cfg' });
const listed = await client.listTaskPushNotificationConfig({ id: phone.id });
await client.deleteTaskPushNotificationConfig({ id: phone.id, pushNotificationConfigId: 'other' });
const left = await client.listTaskPushNotificationConfig({ id: phone.id });
say('push', {
  created: [created.taskId, created.pushNotificationConfig.id],
  read: [read.taskId, read.pushNotificationConfig.url],
  listed: listed.map((c) => c.pushNotificationConfig.id).sort(),
  left: left.map((c) => c.pushNotificationConfig.id),
});

const updates = client.resubscribeTask({ id: phone.id });
const first = await updates.next();
const answered = await client.sendMessage(message('Android', phone));
const rest = [];
for await (const ev of updates) rest.push(ev);
say('resubscribe', { events: [first.value, ...rest].map(event), answered: answered.status.state });
say('sent', { requests: sent });
