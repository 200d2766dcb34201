// The A2A console: a client of the agent's own A2A API (JSON-RPC, protocol 1.0), nothing else.
//
// It reads the agent card for the JSON-RPC endpoint and the security scheme, then chats
// (SendStreamingMessage over fetch with a stream reader: EventSource cannot POST), lists
// tasks, shows one task's timeline, cancels, and manages push configs. Everything the agent
// sends is put on the page with textContent: agent text is never markup.

const VERSION = "1.0";
const CREDENTIAL_KEY = "a2a-console-credential";
const TERMINAL = new Set([
  "TASK_STATE_COMPLETED",
  "TASK_STATE_CANCELED",
  "TASK_STATE_FAILED",
  "TASK_STATE_REJECTED",
]);
const INTERRUPTED = new Set(["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"]);
// What a person reads for each state; the wire name stays in data-state and the tooltip.
const STATE_WORDS = {
  TASK_STATE_SUBMITTED: "Submitted",
  TASK_STATE_WORKING: "Working",
  TASK_STATE_INPUT_REQUIRED: "Needs your input",
  TASK_STATE_AUTH_REQUIRED: "Needs authorization",
  TASK_STATE_COMPLETED: "Completed",
  TASK_STATE_CANCELED: "Canceled",
  TASK_STATE_FAILED: "Failed",
  TASK_STATE_REJECTED: "Rejected",
  TASK_STATE_UNSPECIFIED: "Unknown",
};
// The card's skill examples an empty chat offers, at most this many.
const MAX_EXAMPLES = 12;
// File parts of these types are shown as images as well as offered for download.
const PREVIEWED = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
// A stream's unparsed text may not grow past this (a frame is one line of JSON).
const MAX_FRAME_CHARS = 32 * 1024 * 1024;
// Resubscriptions after a stream ends on a task still at work (the server bounds a stream's
// length; the task goes on).
const MAX_RESUMES = 20;

const $ = (id) => document.getElementById(id);

const agent = {
  endpoint: new URL("../", location.href).href, // until the card names one
  scheme: { kind: "none" }, // or {kind: "apiKey", header} or {kind: "bearer"}
  streaming: false,
  push: false,
};

// ---- small helpers -------------------------------------------------------------------

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function newId() {
  // Not crypto.randomUUID: it needs a secure context, and a console may be reached over
  // plain http on a LAN address.
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function stateClass(state) {
  if (state === "TASK_STATE_COMPLETED") return "state done";
  if (INTERRUPTED.has(state)) return "state waiting";
  if (TERMINAL.has(state)) return "state bad";
  return "state";
}

function stateWords(state) {
  if (!state) return "";
  // A state this page does not know (a newer protocol's) is shown by its own name.
  return Object.hasOwn(STATE_WORDS, state) ? STATE_WORDS[state] : String(state);
}

function showState(node, state) {
  node.textContent = stateWords(state);
  node.dataset.state = state || "";
  node.title = state || "";
  node.className = stateClass(state);
}

function showError(error) {
  const box = $("error");
  box.textContent = error instanceof Error ? error.message : String(error);
  box.hidden = false;
}

function clearError() {
  $("error").hidden = true;
  $("error").textContent = "";
}

class ApiError extends Error {}

// ---- the agent's API -----------------------------------------------------------------

function credential() {
  return sessionStorage.getItem(CREDENTIAL_KEY) || "";
}

function headers(accept) {
  const sent = { "Content-Type": "application/json", "A2A-Version": VERSION, Accept: accept };
  const secret = credential();
  if (secret && agent.scheme.kind === "apiKey") sent[agent.scheme.header] = secret;
  if (secret && agent.scheme.kind === "bearer") sent.Authorization = `Bearer ${secret}`;
  return sent;
}

let requestId = 0;

function request(method, params, accept, signal) {
  const body = JSON.stringify({ jsonrpc: "2.0", id: ++requestId, method, params });
  return fetch(agent.endpoint, { method: "POST", headers: headers(accept), body, signal });
}

function failure(error, status) {
  let text = `${error.message || "error"} (code ${error.code})`;
  if (status === 401) {
    text += agent.scheme.kind === "apiKey"
      ? `: enter an API key above (sent in ${agent.scheme.header})`
      : ": enter a bearer token above (sent as Authorization: Bearer)";
  }
  return new ApiError(text);
}

async function readJson(response) {
  const type = response.headers.get("Content-Type") || "";
  if (!type.includes("json")) {
    throw new ApiError(`the agent answered HTTP ${response.status} ${response.statusText}`);
  }
  return response.json();
}

async function call(method, params) {
  const response = await request(method, params, "application/json");
  const answer = await readJson(response);
  if (answer.error) throw failure(answer.error, response.status);
  return answer.result;
}

// Yields each frame's result; an error frame (or an error answer) throws.
async function* stream(method, params, signal) {
  const response = await request(method, params, "text/event-stream", signal);
  const type = response.headers.get("Content-Type") || "";
  if (!type.startsWith("text/event-stream")) {
    const answer = await readJson(response);
    if (answer.error) throw failure(answer.error, response.status);
    if (answer.result !== undefined) yield answer.result;
    return;
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      // Lines end in LF, CRLF or CR; a CR at the end may be half of a CRLF still to come.
      const complete = buffer.endsWith("\r") ? buffer.length - 1 : buffer.length;
      const ready = buffer.slice(0, complete).replace(/\r\n?/g, "\n");
      buffer = ready + buffer.slice(complete);
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = block
          .split("\n")
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(5).replace(/^ /, ""))
          .join("\n");
        if (!data) continue; // a keep-alive comment, or an id without data
        const frame = JSON.parse(data);
        if (frame.error) throw failure(frame.error, response.status);
        yield frame.result;
      }
      if (buffer.length > MAX_FRAME_CHARS) throw new ApiError("a stream frame is too large");
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

// ---- rendering parts and artifacts ---------------------------------------------------

function safeLink(url) {
  // Only web links: a javascript: or data: URL from the agent must never become clickable.
  try {
    const parsed = new URL(url);
    return parsed.protocol === "https:" || parsed.protocol === "http:" ? parsed.href : null;
  } catch {
    return null;
  }
}

function decodeBase64(raw) {
  const binary = atob(raw);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

function renderPart(part) {
  if (typeof part.text === "string") return el("div", "text", part.text);
  if (part.data !== undefined) return el("pre", "data", JSON.stringify(part.data, null, 2));
  const name = part.filename || "file";
  const type = part.mediaType || "application/octet-stream";
  if (typeof part.raw === "string") {
    const box = el("div", "file");
    try {
      const bytes = decodeBase64(part.raw);
      const link = el("a", "download", `Download ${name}`);
      // Served as a download, typed as bytes: a file never opens as a page of this origin.
      link.href = URL.createObjectURL(new Blob([bytes], { type: "application/octet-stream" }));
      link.download = name;
      box.append(link, el("span", "ids", ` ${type}, ${bytes.length} bytes`));
      if (PREVIEWED.has(type)) {
        // A raster image is shown too (CSP img-src allows data:); never SVG, which is a
        // document of its own.
        const image = el("img", "preview");
        image.alt = name;
        image.src = `data:${type};base64,${part.raw}`;
        box.append(image);
      }
    } catch {
      box.append(el("span", "text", `${name} (${type}): content is not valid base64`));
    }
    return box;
  }
  if (typeof part.url === "string") {
    const href = safeLink(part.url);
    if (!href) return el("div", "text", `${name} (${type}) at ${part.url}`);
    const link = el("a", "", `${name} (${type})`);
    link.href = href;
    link.rel = "noopener noreferrer";
    link.target = "_blank";
    return link;
  }
  return el("pre", "data", JSON.stringify(part, null, 2));
}

function renderParts(parts) {
  const box = el("div", "parts");
  for (const part of parts || []) box.append(renderPart(part));
  return box;
}

function renderMessage(message, label) {
  const user = message.role === "ROLE_USER";
  const item = el("li", user ? "user" : "agent");
  item.append(el("span", "who", label || (user ? "you" : "agent")), renderParts(message.parts));
  return item;
}

// Artifacts by id in one container: an update replaces the artifact, or appends to it.
class Artifacts {
  constructor(container) {
    this.container = container;
    this.shown = new Map();
  }

  apply(artifact, append) {
    let box = this.shown.get(artifact.artifactId);
    if (!box) {
      box = el("div", "artifact");
      box.dataset.artifactId = artifact.artifactId;
      box.append(el("div", "name"), el("div", "parts"));
      this.shown.set(artifact.artifactId, box);
      this.container.append(box);
    }
    const title = artifact.name || artifact.artifactId;
    box.firstChild.textContent = artifact.description ? `${title}: ${artifact.description}` : title;
    if (!append) box.lastChild.replaceChildren();
    for (const part of artifact.parts || []) box.lastChild.append(renderPart(part));
  }
}

// ---- chat ------------------------------------------------------------------------------

const chat = {
  contextId: null,
  taskId: null,
  state: null,
  artifacts: null, // the current task's Artifacts, in artifactItem (one transcript entry)
  artifactItem: null,
  progress: null, // the transcript entry its progress messages replace each other in
  busy: false,
};

function transcript(node) {
  $("examples").hidden = true;
  $("transcript").append(node);
  node.scrollIntoView({ block: "nearest" });
}

// An empty chat offers the card's skill examples; a click puts one in the message box, to
// edit or send (an example is often a template: "the attached report" needs a report).
function showExamples(card) {
  const seen = new Set();
  const list = $("example-list");
  list.replaceChildren();
  for (const skill of Array.isArray(card.skills) ? card.skills : []) {
    for (const example of Array.isArray(skill && skill.examples) ? skill.examples : []) {
      if (typeof example !== "string" || !example.trim() || seen.has(example)) continue;
      if (seen.size >= MAX_EXAMPLES) break;
      seen.add(example);
      const button = el("button", "example", example);
      button.type = "button";
      if (typeof skill.name === "string") button.title = skill.name;
      button.addEventListener("click", () => {
        $("message").value = example;
        $("message").focus();
      });
      list.append(button);
    }
  }
  $("examples").hidden = !seen.size || $("transcript").children.length > 0;
}

function chatIds() {
  const parts = [];
  if (chat.contextId) parts.push(`context ${chat.contextId}`);
  if (chat.taskId) parts.push(`task ${chat.taskId}`);
  $("chat-ids").textContent = parts.join(" · ");
  showState($("chat-state"), chat.state);
  $("chat-cancel").hidden = !chat.taskId || !chat.state || TERMINAL.has(chat.state);
}

function chatTask(task) {
  if (task.id !== chat.taskId) {
    chat.taskId = task.id;
    const box = el("li", "agent");
    box.append(el("span", "who", "artifacts"));
    chat.artifacts = new Artifacts(el("div"));
    box.append(chat.artifacts.container);
    box.hidden = true;
    chat.artifactItem = box;
    transcript(box);
    chat.progress = null;
  }
  chat.contextId = task.contextId || chat.contextId;
}

function chatStatus(status) {
  chat.state = status.state;
  const message = status.message;
  const stopped = TERMINAL.has(status.state) || INTERRUPTED.has(status.state);
  if (stopped && chat.progress) {
    // The task is no longer at work: its last progress line would say it still is.
    chat.progress.remove();
    chat.progress = null;
  }
  if (message && !stopped) {
    // Progress replaces progress: one line, not a bubble per step.
    if (!chat.progress) {
      chat.progress = el("li", "progress");
      transcript(chat.progress);
    }
    chat.progress.textContent = message.parts.map((p) => p.text || "").join(" ");
  } else if (message) {
    transcript(renderMessage(message));
  }
  chatIds();
}

function chatEvent(event) {
  if (event.task) {
    chatTask(event.task);
    for (const artifact of event.task.artifacts || []) chatArtifact(artifact, false);
    chatStatus(event.task.status);
  } else if (event.message) {
    chat.contextId = event.message.contextId || chat.contextId;
    transcript(renderMessage(event.message));
    chatIds();
  } else if (event.statusUpdate) {
    chatStatus(event.statusUpdate.status);
  } else if (event.artifactUpdate) {
    chatArtifact(event.artifactUpdate.artifact, event.artifactUpdate.append);
  }
}

function chatArtifact(artifact, append) {
  chat.artifacts.apply(artifact, append);
  chat.artifactItem.hidden = false;
  transcript(chat.artifactItem); // moves it below what came before
}

function outgoing(text) {
  const message = { messageId: newId(), role: "ROLE_USER", parts: [{ text }] };
  if (chat.contextId) message.contextId = chat.contextId;
  // An interrupted task takes the answer; otherwise a new task in the same conversation.
  if (chat.taskId && INTERRUPTED.has(chat.state)) message.taskId = chat.taskId;
  return message;
}

async function follow(events) {
  for await (const event of events) chatEvent(event);
}

async function sendChat(text) {
  const message = outgoing(text);
  transcript(renderMessage(message));
  if (agent.streaming && $("stream-toggle").checked) {
    await follow(stream("SendStreamingMessage", { message }));
    // A stream ends at the server's time limit too: the task goes on; follow it again.
    for (let resumes = 0; resumes < MAX_RESUMES; resumes++) {
      if (!chat.taskId || TERMINAL.has(chat.state) || INTERRUPTED.has(chat.state)) break;
      await follow(stream("SubscribeToTask", { id: chat.taskId }));
    }
  } else {
    const result = await call("SendMessage", { message });
    chatEvent(result);
  }
}

function newConversation() {
  Object.assign(chat, { contextId: null, taskId: null, state: null, progress: null });
  Object.assign(chat, { artifacts: null, artifactItem: null });
  $("transcript").replaceChildren();
  $("examples").hidden = !$("example-list").children.length;
  chatIds();
  $("message").focus();
}

// ---- tasks -------------------------------------------------------------------------------

const listing = { tokens: [""], page: 0 };

function timestamp(value) {
  if (!value) return "";
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : date.toLocaleString();
}

async function listTasks() {
  const params = {
    pageSize: Number($("filter-size").value),
    includeArtifacts: false,
    historyLength: 0,
  };
  const token = listing.tokens[listing.page];
  if (token) params.pageToken = token;
  const context = $("filter-context").value.trim();
  if (context) params.contextId = context;
  if ($("filter-state").value) params.status = $("filter-state").value;
  const result = await call("ListTasks", params);
  const rows = $("task-rows");
  rows.replaceChildren();
  for (const task of result.tasks || []) {
    const row = el("tr");
    const cell = el("td", "id");
    const link = el("a", "", task.id);
    link.href = `#task/${encodeURIComponent(task.id)}`;
    cell.append(link);
    const state = el("td");
    const badge = el("span");
    showState(badge, task.status && task.status.state);
    state.append(badge);
    row.append(cell, state, el("td", "id", task.contextId || ""));
    row.append(el("td", "", timestamp(task.status && task.status.timestamp)));
    rows.append(row);
  }
  if (!rows.children.length) {
    const row = el("tr");
    const cell = el("td", "", "No tasks match.");
    cell.colSpan = 4;
    row.append(cell);
    rows.append(row);
  }
  listing.tokens[listing.page + 1] = result.nextPageToken || "";
  listing.tokens.length = listing.page + 2;
  $("page-prev").disabled = listing.page === 0;
  $("page-next").disabled = !result.nextPageToken;
  const total = typeof result.totalSize === "number" ? ` of ${result.totalSize} tasks` : "";
  $("page-info").textContent = `page ${listing.page + 1}${total}`;
}

// ---- one task ----------------------------------------------------------------------------

const viewed = { id: null, task: null, watch: null, artifacts: null };

function timelineStatus(status) {
  const item = el("li", "status");
  const line = el("span", "who", `${stateWords(status.state)} · ${timestamp(status.timestamp)}`);
  line.dataset.state = status.state || "";
  item.append(line);
  if (status.message) item.append(renderParts(status.message.parts));
  $("timeline").append(item);
}

function renderTask(task) {
  viewed.task = task;
  $("task-title").textContent = `task ${task.id}`;
  $("task-context").textContent = `context ${task.contextId || ""}`;
  showState($("task-state"), task.status.state);
  $("task-cancel").hidden = TERMINAL.has(task.status.state);
  const timeline = $("timeline");
  timeline.replaceChildren();
  for (const message of task.history || []) timeline.append(renderMessage(message));
  timelineStatus(task.status);
  viewed.artifacts = new Artifacts($("artifacts"));
  $("artifacts").replaceChildren();
  for (const artifact of task.artifacts || []) viewed.artifacts.apply(artifact, false);
}

function stopWatching() {
  if (viewed.watch) viewed.watch.abort();
  viewed.watch = null;
}

// While the task is at work, its status changes and artifacts arrive as they happen; a
// stream the server ends at its time limit is opened again (MAX_RESUMES times).
async function watchTask(id, resumes = 0) {
  stopWatching();
  const controller = new AbortController();
  viewed.watch = controller;
  try {
    for await (const event of stream("SubscribeToTask", { id }, controller.signal)) {
      if (viewed.id !== id) return;
      if (event.task) renderTask(event.task);
      if (event.statusUpdate) {
        const status = event.statusUpdate.status;
        showState($("task-state"), status.state);
        $("task-cancel").hidden = TERMINAL.has(status.state);
        timelineStatus(status);
      }
      if (event.artifactUpdate) {
        viewed.artifacts.apply(event.artifactUpdate.artifact, event.artifactUpdate.append);
      }
    }
  } catch (error) {
    if (error.name !== "AbortError") showError(error);
    return;
  } finally {
    if (viewed.watch === controller) viewed.watch = null;
  }
  const state = $("task-state").dataset.state;
  if (viewed.id === id && !TERMINAL.has(state) && !INTERRUPTED.has(state)) {
    if (resumes < MAX_RESUMES) watchTask(id, resumes + 1);
  }
}

async function openTask(id) {
  stopWatching();
  viewed.id = id;
  const task = await call("GetTask", { id });
  if (viewed.id !== id) return;
  renderTask(task);
  await listPush();
  const state = task.status.state;
  if (agent.streaming && !TERMINAL.has(state) && !INTERRUPTED.has(state)) watchTask(id);
}

async function cancelTask(id) {
  const task = await call("CancelTask", { id });
  if (viewed.id === id) renderTask(task);
  if (chat.taskId === id) chatStatus(task.status);
  return task;
}

async function listPush() {
  $("push").hidden = !agent.push;
  $("push-off").hidden = agent.push;
  if (!agent.push) return;
  const result = await call("ListTaskPushNotificationConfigs", { taskId: viewed.id });
  const rows = $("push-rows");
  rows.replaceChildren();
  for (const config of result.configs || []) {
    const row = el("tr");
    row.append(el("td", "id", config.id), el("td", "id", config.url));
    row.append(el("td", "", config.token ? "set" : ""));
    const cell = el("td");
    const remove = el("button", "", "Delete");
    remove.type = "button";
    remove.addEventListener("click", () =>
      act(async () => {
        await call("DeleteTaskPushNotificationConfig", { taskId: viewed.id, id: config.id });
        await listPush();
      }),
    );
    cell.append(remove);
    row.append(cell);
    rows.append(row);
  }
  if (!rows.children.length) {
    const row = el("tr", "empty");
    const cell = el("td", "", "No push configs: add a webhook below.");
    cell.colSpan = 4;
    row.append(cell);
    rows.append(row);
  }
}

async function addPush() {
  const params = { taskId: viewed.id, url: $("push-url").value.trim() };
  const token = $("push-token").value.trim();
  if (token) params.token = token;
  await call("CreateTaskPushNotificationConfig", params);
  $("push-url").value = "";
  $("push-token").value = "";
  await listPush();
}

// ---- views, credentials, start -----------------------------------------------------------

// Runs an action from the page; its failure is shown, never thrown into the void.
async function act(action) {
  clearError();
  try {
    await action();
  } catch (error) {
    showError(error);
  }
}

function route() {
  const hash = decodeURIComponent(location.hash.slice(1));
  const view = hash.startsWith("task/") ? "task" : hash === "tasks" ? "tasks" : "chat";
  for (const name of ["chat", "tasks", "task"]) $(`view-${name}`).hidden = name !== view;
  $("nav-chat").setAttribute("aria-current", view === "chat" ? "page" : "false");
  $("nav-tasks").setAttribute("aria-current", view === "chat" ? "false" : "page");
  if (view !== "task") {
    stopWatching();
    viewed.id = null;
  }
  if (view === "tasks") act(listTasks);
  if (view === "task") act(() => openTask(hash.slice(5)));
}

function readScheme(card) {
  for (const scheme of Object.values(card.securitySchemes || {})) {
    const apiKey = scheme.apiKeySecurityScheme;
    if (apiKey && apiKey.location === "header") return { kind: "apiKey", header: apiKey.name };
    if (scheme.httpAuthSecurityScheme || scheme.openIdConnectSecurityScheme) {
      return { kind: "bearer" };
    }
    if (scheme.oauth2SecurityScheme) return { kind: "bearer" };
  }
  return { kind: "none" };
}

function readEndpoint(card) {
  const found = (card.supportedInterfaces || []).find(
    (i) => i.protocolBinding === "JSONRPC" && i.protocolVersion === VERSION,
  );
  if (!found) throw new ApiError("the agent card offers no JSON-RPC interface for A2A 1.0");
  const url = new URL(found.url, location.href);
  // The page may only talk to its own origin (Content-Security-Policy connect-src 'self'):
  // an agent whose card names another host (a custom domain) is reached here at that path.
  return url.origin === location.origin ? url.href : new URL(url.pathname, location.href).href;
}

function showCredentials() {
  const form = $("credentials");
  form.hidden = agent.scheme.kind === "none";
  if (agent.scheme.kind === "apiKey") {
    $("credential-label").textContent = "API key";
    $("credential-hint").textContent = `sent in ${agent.scheme.header}`;
  } else if (agent.scheme.kind === "bearer") {
    $("credential-label").textContent = "Bearer token";
    $("credential-hint").textContent = "sent as Authorization: Bearer";
  }
  $("credential").value = credential();
}

async function loadCard() {
  const response = await fetch(new URL("../.well-known/agent-card.json", location.href));
  if (!response.ok) throw new ApiError(`the agent card answered HTTP ${response.status}`);
  const card = await response.json();
  $("agent-name").textContent = card.name || "A2A agent";
  $("agent-description").textContent = card.description || "";
  document.title = `${card.name || "A2A agent"} · A2A console`;
  agent.endpoint = readEndpoint(card);
  agent.scheme = readScheme(card);
  agent.streaming = Boolean(card.capabilities && card.capabilities.streaming);
  agent.push = Boolean(card.capabilities && card.capabilities.pushNotifications);
  $("stream-toggle").checked = agent.streaming;
  $("stream-toggle").disabled = !agent.streaming;
  showCredentials();
  showExamples(card);
}

function wire() {
  $("credentials").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(CREDENTIAL_KEY, $("credential").value.trim());
    clearError();
  });
  $("credential-forget").addEventListener("click", () => {
    sessionStorage.removeItem(CREDENTIAL_KEY);
    $("credential").value = "";
  });
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("message").value;
    if (!text.trim() || chat.busy) return;
    $("message").value = "";
    chat.busy = true;
    $("send").disabled = true;
    act(() => sendChat(text)).finally(() => {
      chat.busy = false;
      $("send").disabled = false;
    });
  });
  $("message").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("new-chat").addEventListener("click", newConversation);
  $("chat-cancel").addEventListener("click", () => act(() => cancelTask(chat.taskId)));
  $("task-filters").addEventListener("submit", (event) => {
    event.preventDefault();
    listing.tokens = [""];
    listing.page = 0;
    act(listTasks);
  });
  $("page-next").addEventListener("click", () => {
    listing.page += 1;
    act(listTasks);
  });
  $("page-prev").addEventListener("click", () => {
    listing.page = Math.max(0, listing.page - 1);
    act(listTasks);
  });
  $("task-refresh").addEventListener("click", () => act(() => openTask(viewed.id)));
  $("task-cancel").addEventListener("click", () => act(() => cancelTask(viewed.id)));
  $("push-form").addEventListener("submit", (event) => {
    event.preventDefault();
    act(addPush);
  });
  window.addEventListener("hashchange", route);
}

wire();
act(async () => {
  await loadCard();
  document.body.dataset.ready = "true"; // the card is read: the console can talk
  route();
});
