// Streams from an a2a-functions server with the official JS SDK (@a2a-js/sdk), as a user would:
// node stream.mjs <base url>. Prints one JSON line per event: {"stream": ..., "case": ..., "state": ...}.
import { randomUUID } from 'node:crypto';
import { TaskState } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';

const client = await new ClientFactory().createFromUrl(process.argv[2]);
const print = (stream, ev) => {
  const { $case, value } = ev.payload;
  const state = value.status ? TaskState[value.status.state] : null;
  console.log(JSON.stringify({ stream, case: $case, state, id: value.id ?? value.taskId }));
};
const say = (text, taskId) => ({
  message: {
    messageId: randomUUID(),
    role: 1, // ROLE_USER
    parts: [{ content: { $case: 'text', value: text } }],
    ...(taskId ? { taskId } : {}),
  },
});

let taskId;
for await (const ev of client.sendMessageStream(say('I would like a new phone'))) {
  if (ev.payload.$case === 'task') taskId = ev.payload.value.id;
  print('send', ev);
}
const updates = client.resubscribeTask({ id: taskId });
const first = await updates.next();
print('subscribe', first.value);
await client.sendMessage(say('Android', taskId));
for await (const ev of updates) print('subscribe', ev);
