// A scripted ACP client on the Agent Client Protocol's own TypeScript SDK: the second,
// independent client that `margin acp`'s end-to-end tests drive the agent with.
//
//   node ts_client.mjs SCENARIO.json -- AGENT_COMMAND [ARG...]
//
// It spawns the agent, runs the scenario's steps in order and prints one JSON transcript on
// stdout at the end (tests/e2e/acp/ts_client.py documents both). The SDK is loaded from
// MARGIN_ACP_TOOLS, the folder scripts/install-acp-tools.sh prints, else from what that script's
// --check prints. Exits 0 when the run had no error (a JSON-RPC error answering a step is a
// result, not an error), 1 on a protocol error, a timeout or an agent gone early (the transcript
// is still printed, with `errors`), 2 on a bad command line or scenario.
import { execFileSync, spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Readable } from "node:stream";

const STEPS = ["new", "load", "list", "prompt", "setMode", "setConfig", "raw", "notify", "sleep"];
const ANSWERS = ["allow_once", "allow_always", "reject_once", "reject_always", "never", "cancelled"];
const TYPES = {  // incoming requests by method; any other is "request"
  "session/request_permission": "permission",
  "fs/read_text_file": "read",
  "fs/write_text_file": "write",
};
const MARK = "margin.test/seq";  // added to each session/update's _meta to see the SDK parse it
const EXIT_GRACE_MS = 5000;  // how long the agent may take to exit once its stdin is closed
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function usage(message) {
  process.stderr.write(`ts_client: ${message}\n`);
  process.exit(2);
}

// The command line and the scenario, checked before anything starts.
const argv = process.argv.slice(2);
const dash = argv.indexOf("--");
if (dash !== 1 || argv.length < 3) usage("usage: ts_client.mjs SCENARIO.json -- AGENT_COMMAND [ARG...]");
let scenario;
try {
  scenario = JSON.parse(readFileSync(argv[0], "utf8"));
} catch (e) {
  usage(`cannot read the scenario ${argv[0]}: ${e.message}`);
}
const steps = scenario.steps ?? [];
const permissions = scenario.permissions ?? [];
steps.forEach((s, i) => STEPS.includes(s.do) || usage(`step ${i}: unknown "do": ${JSON.stringify(s.do)}`));
permissions.forEach((p) => ANSWERS.includes(p) || usage(`unknown permission answer ${JSON.stringify(p)}`));
const buffers = { ...scenario.buffers };
const cwd = scenario.cwd ?? process.cwd();
const mcpServers = scenario.mcpServers ?? [];

// The SDK, from the installed tools folder (it is ESM-only, so NODE_PATH cannot find it).
let tools = process.env.MARGIN_ACP_TOOLS;
if (!tools) {
  const script = fileURLToPath(new URL("../../../scripts/install-acp-tools.sh", import.meta.url));
  try {
    tools = execFileSync("bash", [script, "--check"], { encoding: "utf8" }).trim();
  } catch {
    usage("the ACP SDK is not installed: run scripts/install-acp-tools.sh");
  }
}
const sdkEntry = scenario.sdk === "unstable" ? "@agentclientprotocol/sdk/unstable" : "@agentclientprotocol/sdk";
const acp = await import(pathToFileURL(createRequire(path.join(tools, "package.json")).resolve(sdkEntry)).href);
const sdkVersion = JSON.parse(
  readFileSync(path.join(tools, "node_modules/@agentclientprotocol/sdk/package.json"), "utf8"),
).version;

const transcript = {
  sdkVersion,
  initialize: null,
  results: [],   // one per request step: {step, do, method, result | error}
  messages: [],  // every message from the agent, in arrival order
  sent: [],      // every message to the agent (on the same seq counter as messages)
  buffers,       // the client's buffers at the end, with the agent's writes into them
  agentExitCode: null,
  agentSignal: null,
  errors: [],
};
let seq = 0;
const sentRequests = new Map();   // our request id -> method, to name the responses
const responses = new Map();      // our request id -> the agent's response, as it came
let nextCall = null;              // the step whose request the SDK writes next (steps run one by one)
const agentRequests = new Map();  // the agent's request id -> its entry, to attach our answer
const updates = new Map();        // seq -> entry of each session/update
let turn = null;                  // the prompt in flight: {sessionId, cancelWhen, cancelled}

function error(message) {
  transcript.errors.push(message);
  process.stderr.write(`ts_client: ${message}\n`);
}

let finished = false;
async function finish(fatal) {  // prints the transcript once (with the agent's exit) and exits
  if (finished) return;
  finished = true;
  if (fatal) error(fatal);
  if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await Promise.race([exited, sleep(2000)]);
  process.stdout.write(JSON.stringify(transcript) + "\n", () => process.exit(transcript.errors.length ? 1 : 0));
}

const child = spawn(argv[2], argv.slice(3), { stdio: ["pipe", "pipe", "inherit"] });
child.on("error", (e) => void finish(`cannot run the agent ${argv[2]}: ${e.message}`));
child.stdin.on("error", () => {});  // EPIPE once the agent is gone: its exit is what we report
const exited = new Promise((resolve) =>
  child.on("exit", (code, signal) => {
    transcript.agentExitCode = code;
    transcript.agentSignal = signal;
    resolve();
  }),
);
const timeoutMs = scenario.timeoutMs ?? 120000;
setTimeout(() => void finish(`timed out after ${timeoutMs} ms`), timeoutMs).unref();

// What the client sends: each line is logged (the SDK writes one whole message a write).
let outText = "";
const decoder = new TextDecoder();
const toAgent = new WritableStream({
  write(chunk) {
    outText += decoder.decode(chunk, { stream: true });
    const lines = outText.split("\n");
    outText = lines.pop();
    for (const line of lines.filter((l) => l.trim())) sent(JSON.parse(line));
    return new Promise((resolve, reject) => child.stdin.write(chunk, (e) => (e ? reject(e) : resolve())));
  },
});

function sent(msg) {
  const entry = { seq: seq++ };
  if (typeof msg.method === "string") {
    Object.assign(entry, { method: msg.method, ...("id" in msg && { id: msg.id }), params: msg.params });
    if ("id" in msg) sentRequests.set(msg.id, msg.method);
    if ("id" in msg && nextCall) [nextCall.id, nextCall] = [msg.id, null];
  } else {
    Object.assign(entry, { id: msg.id, ...("error" in msg ? { error: msg.error } : { result: msg.result }) });
    const request = agentRequests.get(msg.id);
    if (request) request.answer = "error" in msg ? { error: msg.error } : { result: msg.result };
    // The SDK answers with id null what it could not take as JSON-RPC at all.
    if (msg.id === null) error(`the agent sent what is not JSON-RPC; the SDK answered ${JSON.stringify(msg.error)}`);
  }
  transcript.sent.push(entry);
}

// What the agent sends: logged as it arrives, before the SDK handles it.
function received(msg) {
  const entry = { seq: seq++ };
  if (typeof msg.method === "string") {
    const isRequest = "id" in msg;
    entry.type = isRequest ? (TYPES[msg.method] ?? "request")
      : msg.method === "session/update" ? "update" : "notification";
    Object.assign(entry, { method: msg.method, ...(isRequest && { id: msg.id }), params: msg.params });
    if (isRequest) agentRequests.set(msg.id, entry);
  } else {
    Object.assign(entry, { type: "response", method: sentRequests.get(msg.id) ?? null, id: msg.id });
    Object.assign(entry, "error" in msg ? { error: msg.error } : { result: msg.result });
    responses.set(msg.id, entry);
    if (entry.method === null) error(`the agent answered a request never sent: ${JSON.stringify(msg)}`);
  }
  transcript.messages.push(entry);
  if (entry.type !== "update") return msg;
  entry.sdkParsed = false;  // set by the session/update handler once the SDK's schema took it
  updates.set(entry.seq, entry);
  watchForCancel(entry.params);
  const p = msg.params;
  if (!p || typeof p !== "object" || Array.isArray(p)) return msg;
  const meta = p._meta && typeof p._meta === "object" && !Array.isArray(p._meta) ? p._meta : {};
  return { ...msg, params: { ...p, _meta: { ...meta, [MARK]: entry.seq } } };
}

function watchForCancel(params) {
  const when = turn?.cancelWhen;
  const update = params?.update ?? {};
  if (when?.toolKind && params?.sessionId === turn.sessionId
      && ["tool_call", "tool_call_update"].includes(update.sessionUpdate) && update.kind === when.toolKind) {
    cancel(turn);
  }
}

function cancel(t) {
  if (t.cancelled || turn !== t) return;
  t.cancelled = true;
  ctx.notify("session/cancel", { sessionId: t.sessionId }).catch((e) => error(`session/cancel not sent: ${e.message}`));
}

// The client side: permissions answered as scripted, files served from buffers or disk.
let permissionCount = 0;
function answerPermission(params) {
  // Once the client has cancelled a turn, ACP has it answer the turn's permissions cancelled.
  if (turn?.cancelled && turn.sessionId === params.sessionId) return { outcome: { outcome: "cancelled" } };
  const n = permissionCount++;
  const answer = permissions[n];
  if (answer === "never") return new Promise(() => {});
  if (answer === "cancelled") return { outcome: { outcome: "cancelled" } };
  const option = params.options.find((o) => o.kind === answer);
  if (!option) {
    error(answer === undefined ? `permission request ${n} has no scripted answer`
      : `permission request ${n} offers no option of kind ${answer}`);
    return { outcome: { outcome: "cancelled" } };
  }
  return { outcome: { outcome: "selected", optionId: option.optionId } };
}

function readText({ path: file, line, limit }) {
  if (!path.isAbsolute(file)) throw acp.RequestError.invalidParams({ path: file }, "path must be absolute");
  let text;
  if (Object.hasOwn(buffers, file)) {
    text = buffers[file];
  } else {
    try {
      text = readFileSync(file, "utf8");
    } catch {
      throw acp.RequestError.resourceNotFound(pathToFileURL(file).href);
    }
  }
  if (line == null && limit == null) return { content: text };
  const lines = text.split(/(?<=\n)/);  // each line keeps its own ending
  const start = Math.max((line ?? 1) - 1, 0);
  return { content: lines.slice(start, limit == null ? undefined : start + limit).join("") };
}

function writeText({ path: file, content }) {
  if (!path.isAbsolute(file)) throw acp.RequestError.invalidParams({ path: file }, "path must be absolute");
  if (Object.hasOwn(buffers, file)) buffers[file] = content;
  else writeFileSync(file, content);
  return {};
}

const app = acp.client({ name: "margin-ts-client" })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => answerPermission(params))
  .onRequest(acp.methods.client.fs.readTextFile, ({ params }) => readText(params))
  .onRequest(acp.methods.client.fs.writeTextFile, ({ params }) => writeText(params))
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    const entry = updates.get(params._meta?.[MARK]);
    if (entry) entry.sdkParsed = true;
  });
const fromAgent = acp.ndJsonStream(toAgent, Readable.toWeb(child.stdout));
const connection = app.connect({
  writable: fromAgent.writable,
  readable: fromAgent.readable.pipeThrough(new TransformStream({ transform: (m, c) => c.enqueue(received(m)) })),
});
const ctx = connection.agent;  // calls the agent

// The steps.
let lastSessionId = null;
const session = (id) => (id === undefined || id === "last" ? lastSessionId : id);

// A step's request, sent by the SDK; its result or error is recorded exactly as the agent sent
// it (the SDK's own view differs: it turns a null result into {}, and a -32002 error answering
// session/close or session/delete into {}).
async function call(i, step, method, params) {
  const entry = { step: i, do: step.do, method };
  nextCall = entry;
  let sdkError;
  try {
    await ctx.request(method, params);
  } catch (e) {
    const where = i === null ? method : `${method} (step ${i})`;
    if (typeof e?.code !== "number") throw new Error(`${where} got no answer (connection ended: ${e?.message ?? e})`);
    sdkError = { code: e.code, message: e.message, ...(e.data !== undefined && { data: e.data }) };
  }
  const raw = responses.get(entry.id) ?? { error: sdkError };  // none: the SDK refused the response
  Object.assign(entry, "error" in raw ? { error: raw.error } : { result: raw.result });
  transcript.results.push(entry);
  return entry;
}

async function run(i, step) {
  const params = { ...step.params };
  if (params.sessionId === "last") params.sessionId = lastSessionId;
  const sessionId = session(step.sessionId);
  switch (step.do) {
    case "new": {
      const r = await call(i, step, "session/new", { cwd, mcpServers, ...params });
      if (r.result?.sessionId) lastSessionId = r.result.sessionId;
      return;
    }
    case "load": {
      const r = await call(i, step, "session/load", { sessionId, cwd, mcpServers, ...params });
      if (r.result) lastSessionId = sessionId;
      return;
    }
    case "list":
      return call(i, step, "session/list", params);
    case "setMode":
      return call(i, step, "session/set_mode", { sessionId, modeId: step.modeId, ...params });
    case "setConfig":
      return call(i, step, "session/set_config_option",
        { sessionId, configId: step.configId, value: step.value, ...params });
    case "raw":
      return call(i, step, step.method, params);
    case "notify":
      await ctx.notify(step.method, params);
      transcript.results.push({ step: i, do: step.do, method: step.method, sent: true });
      return;
    case "sleep":  // time for whatever the agent still sends (e.g. late updates) to arrive
      return sleep(step.ms ?? 0);
    case "prompt": {
      const t = { sessionId, cancelWhen: step.cancelWhen ?? null, cancelled: false };
      turn = t;
      const after = t.cancelWhen?.afterMs;
      const timer = after == null ? null : setTimeout(() => cancel(t), after);
      try {
        const prompt = [{ type: "text", text: step.text ?? "" }];
        const r = await call(i, step, "session/prompt", { sessionId, prompt, ...params });
        r.cancelSent = t.cancelled;
      } finally {
        clearTimeout(timer);
        turn = null;
      }
    }
  }
}

try {
  const init = await call(null, { do: "initialize" }, "initialize", {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: scenario.clientCapabilities ?? {},
    clientInfo: { name: "margin-ts-client", version: sdkVersion },
    ...scenario.initialize,
  });
  transcript.results.pop();  // initialize has its own place in the transcript
  if (init.error) throw new Error(`initialize failed: ${JSON.stringify(init.error)}`);
  transcript.initialize = init.result;
  for (const [i, step] of steps.entries()) await run(i, step);
} catch (e) {
  await finish(e.message);
}
// End of input: the agent should exit by itself, with everything it still had to say read.
if (!finished) {
  child.stdin.end();
  const ended = Promise.all([exited, connection.closed]).then(() => true);
  if (!(await Promise.race([ended, sleep(EXIT_GRACE_MS).then(() => false)]))) {
    child.kill("SIGTERM");
    await exited;
  }
  await finish();
}
