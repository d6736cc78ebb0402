// The chat panel's script (runs in the webview). Renders the conversation as Markdown with
// markdown-it (raw HTML in replies is shown as text, never run), streams the reply as it
// arrives, and draws the budget bar the extension computed. In Agent mode it shows the agent's
// turn as it streams: a line per step, per call (with its status) and per rejection told to the
// model, the model's own output dimmed, then the answer and how the turn stopped.

import MarkdownIt from "markdown-it";
import type { AgentLine } from "../pure/agent";
import { statusMark } from "../pure/agent";

interface Segment { name: string; tokens: number; percent: number }
interface BudgetView { segments: Segment[]; used: number; usedPercent: number; label: string; detail: string[] }

type Mode = "chat" | "agent";

type ToWebview =
  | { type: "history"; messages: { role: string; content: string }[] }
  | { type: "user"; text: string; mode?: Mode }
  | { type: "start" }
  | { type: "delta"; text: string }
  | { type: "done"; reply: string; message: string | null; budget: BudgetView }
  | { type: "error"; message: string }
  | { type: "mode"; mode: Mode }
  | { type: "agentStart" }
  | { type: "agentLine"; line: AgentLine }
  | { type: "agentNote"; text: string }
  | { type: "agentDone"; answer: string; stopped: string; summary: string }
  | { type: "agentStopped"; message: string; cancelled: boolean };

declare function acquireVsCodeApi(): { postMessage(message: unknown): void };

const vscode = acquireVsCodeApi();
const markdown = new MarkdownIt({ html: false, linkify: false, breaks: false });
const log = document.getElementById("log") as HTMLElement;
const input = document.getElementById("input") as HTMLTextAreaElement;
const send = document.getElementById("send") as HTMLButtonElement;
const cancel = document.getElementById("cancel") as HTMLButtonElement;
const budget = document.getElementById("budget") as HTMLElement;
const modeButtons = { chat: document.getElementById("mode-chat") as HTMLButtonElement,
                      agent: document.getElementById("mode-agent") as HTMLButtonElement };
const PLACEHOLDER: Record<Mode, string> = {
  chat: "Ask Margin about your code (Enter sends, Shift+Enter adds a line)",
  agent: "Give Margin's agent a task: it reads, edits and runs commands in this folder, asking before each edit or command",
};

let streaming: { element: HTMLElement; text: string; frame: number } | undefined;
let mode: Mode = "chat";
/** The agent turn being shown: its element, its steps' list, and the model's output of the step. */
let turn: { element: HTMLElement; steps: HTMLElement; raw: HTMLElement | undefined; answered: boolean } | undefined;

function setMode(next: Mode, tell: boolean): void {
  mode = next;
  for (const [name, button] of Object.entries(modeButtons)) {
    button.setAttribute("aria-checked", String(name === mode));
    button.classList.toggle("selected", name === mode);
  }
  input.placeholder = PLACEHOLDER[mode];
  cancel.textContent = mode === "agent" ? "Stop" : "Cancel";
  document.body.dataset.mode = mode;
  if (tell) vscode.postMessage({ type: "mode", mode });
}

function add(role: string, content: string): HTMLElement {
  const element = document.createElement("article");
  element.className = `message ${role}`;
  element.dataset.role = role;
  if (role === "assistant") element.innerHTML = markdown.render(content);
  else element.textContent = content;
  log.appendChild(element);
  element.scrollIntoView({ block: "end" });
  return element;
}

function note(text: string, kind: "error" | "info"): void {
  const element = document.createElement("p");
  element.className = `note ${kind}`;
  element.textContent = text;
  log.appendChild(element);
  element.scrollIntoView({ block: "end" });
}

function busy(on: boolean): void {
  send.disabled = on;
  cancel.disabled = !on;
  modeButtons.chat.disabled = on;
  modeButtons.agent.disabled = on;
}

function agentRow(className: string, ...parts: (string | HTMLElement)[]): HTMLElement {
  const row = document.createElement("div");
  row.className = `agent-line ${className}`;
  parts.forEach((part, index) => row.append(...(index ? [" ", part] : [part])));
  return row;
}

function span(className: string, text: string): HTMLElement {
  const element = document.createElement("span");
  element.className = className;
  element.textContent = text;
  return element;
}

function showAgentLine(line: AgentLine): void {
  if (!turn) return;
  turn.steps.querySelector(".agent-line.waiting")?.remove();
  switch (line.kind) {
    case "step":
      turn.raw = undefined;
      turn.steps.append(agentRow("step", span("what", line.text), span("detail", line.detail)));
      break;
    case "text":
      if (!turn.raw) {
        turn.raw = agentRow("raw");
        turn.raw.title = "The model's output";
        turn.steps.append(turn.raw);
      }
      turn.raw.textContent += line.text;
      break;
    case "call": {
      const row = agentRow(`call ${line.status}`, span("mark", statusMark(line.status)), span("what", line.text),
        span("status", line.status));
      if (line.detail) row.append(" ", span("detail", line.detail));
      if (line.pointer) row.title = line.pointer;
      row.dataset.status = line.status;
      turn.steps.append(row);
      break;
    }
    case "told":
      turn.steps.append(agentRow("told", span("mark", "!"), span("what", line.text),
        ...(line.detail ? [span("detail", line.detail)] : [])));
      break;
    case "final":
      answer(line.text, line.stopped);
      break;
  }
  turn.element.scrollIntoView({ block: "end" });
}

/** The turn's answer, rendered as Markdown (how it stopped follows, in the summary). */
function answer(text: string, stopped: string): void {
  if (!turn || turn.answered || !text) return;
  turn.answered = true;
  const element = document.createElement("div");
  element.className = `answer ${stopped === "finished" ? "finished" : "stopped-early"}`;
  element.innerHTML = markdown.render(text);
  turn.element.append(element);
}

function endTurn(summary: string, kind: "info" | "error"): void {
  busy(false);
  if (!turn) {
    if (summary) note(summary, kind);
    return;
  }
  turn.element.classList.remove("streaming");
  turn.steps.querySelector(".agent-line.waiting")?.remove();
  if (summary) {
    const line = document.createElement("p");
    line.className = `summary ${kind}`;
    line.textContent = summary;
    turn.element.append(line);
  }
  turn.element.scrollIntoView({ block: "end" });
  turn = undefined;
}

function drawBudget(view: BudgetView): void {
  const bar = budget.querySelector(".bar") as HTMLElement;
  bar.replaceChildren(...view.segments.map((segment, index) => {
    const part = document.createElement("span");
    part.className = `segment s${index % 6}${segment.name === "reserved for the reply" ? " reserved" : ""}`;
    part.style.width = `${segment.percent}%`;
    part.title = `${segment.name}: ${segment.tokens.toLocaleString("en-US")} tokens`;
    return part;
  }));
  bar.setAttribute("aria-label", view.label);
  const legend = budget.querySelector(".legend") as HTMLElement;
  legend.replaceChildren(...view.segments.map((segment, index) => {
    const entry = document.createElement("span");
    entry.className = "entry";
    const swatch = document.createElement("span");
    swatch.className = `swatch s${index % 6}${segment.name === "reserved for the reply" ? " reserved" : ""}`;
    entry.append(swatch, `${segment.name} ${segment.tokens.toLocaleString("en-US")}`);
    return entry;
  }));
  (budget.querySelector(".label") as HTMLElement).textContent = view.label;
  budget.title = view.detail.join("\n");
  budget.hidden = false;
}

window.addEventListener("message", (event: MessageEvent<ToWebview>) => {
  const message = event.data;
  switch (message.type) {
    case "history":
      log.replaceChildren();
      for (const m of message.messages) add(m.role, m.content);
      break;
    case "user":
      add("user", message.text).classList.toggle("task", message.mode === "agent");
      break;
    case "start":
      busy(true);
      streaming = { element: add("assistant", ""), text: "", frame: 0 };
      streaming.element.classList.add("streaming");
      break;
    case "delta":
      if (!streaming) break;
      streaming.text += message.text;
      if (!streaming.frame) {
        const current = streaming;
        current.frame = requestAnimationFrame(() => {
          current.frame = 0;
          current.element.innerHTML = markdown.render(current.text);
          current.element.scrollIntoView({ block: "end" });
        });
      }
      break;
    case "done":
      busy(false);
      if (streaming) {
        cancelAnimationFrame(streaming.frame);
        streaming.element.classList.remove("streaming");
        if (message.reply) streaming.element.innerHTML = markdown.render(message.reply);
        else streaming.element.remove();
        streaming = undefined;
      }
      if (message.message) note(message.message, "info");
      drawBudget(message.budget);
      break;
    case "error":
      busy(false);
      if (streaming) {
        cancelAnimationFrame(streaming.frame);
        if (!streaming.text) streaming.element.remove();
        streaming = undefined;
      }
      note(message.message, "error");
      break;
    case "mode":
      setMode(message.mode, false);
      break;
    case "agentStart": {
      busy(true);
      const element = document.createElement("article");
      element.className = "message agent streaming";
      element.dataset.role = "agent";
      const steps = document.createElement("div");
      steps.className = "steps";
      element.append(steps);
      log.appendChild(element);
      element.scrollIntoView({ block: "end" });
      turn = { element, steps, raw: undefined, answered: false };
      break;
    }
    case "agentLine":
      showAgentLine(message.line);
      break;
    case "agentNote":
      if (turn) {
        turn.steps.querySelector(".agent-line.waiting")?.remove();
        turn.steps.append(agentRow("waiting", span("what", message.text)));
        turn.element.scrollIntoView({ block: "end" });
      }
      break;
    case "agentDone":
      answer(message.answer, message.stopped);
      endTurn(message.summary, "info");
      break;
    case "agentStopped":
      endTurn(message.message, message.cancelled ? "info" : "error");
      break;
  }
});

function submit(): void {
  const text = input.value.trim();
  if (!text || send.disabled) return;
  input.value = "";
  vscode.postMessage({ type: "send", text, mode });
}

(document.getElementById("form") as HTMLFormElement).addEventListener("submit", (event) => {
  event.preventDefault();
  submit();
});
input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    submit();
  }
});
cancel.addEventListener("click", () => vscode.postMessage({ type: "cancel" }));
modeButtons.chat.addEventListener("click", () => setMode("chat", true));
modeButtons.agent.addEventListener("click", () => setMode("agent", true));
(document.getElementById("new") as HTMLButtonElement).addEventListener("click", () => vscode.postMessage({ type: "newThread" }));
vscode.postMessage({ type: "ready" });
