// The chat panel's script (runs in the webview). Renders the conversation as Markdown with
// markdown-it (raw HTML in replies is shown as text, never run), streams the reply as it
// arrives, and draws the budget bar the extension computed.

import MarkdownIt from "markdown-it";

interface Segment { name: string; tokens: number; percent: number }
interface BudgetView { segments: Segment[]; used: number; usedPercent: number; label: string; detail: string[] }

type ToWebview =
  | { type: "history"; messages: { role: string; content: string }[] }
  | { type: "user"; text: string }
  | { type: "start" }
  | { type: "delta"; text: string }
  | { type: "done"; reply: string; message: string | null; budget: BudgetView }
  | { type: "error"; message: string };

declare function acquireVsCodeApi(): { postMessage(message: unknown): void };

const vscode = acquireVsCodeApi();
const markdown = new MarkdownIt({ html: false, linkify: false, breaks: false });
const log = document.getElementById("log") as HTMLElement;
const input = document.getElementById("input") as HTMLTextAreaElement;
const send = document.getElementById("send") as HTMLButtonElement;
const cancel = document.getElementById("cancel") as HTMLButtonElement;
const budget = document.getElementById("budget") as HTMLElement;

let streaming: { element: HTMLElement; text: string; frame: number } | undefined;

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
      add("user", message.text);
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
  }
});

function submit(): void {
  const text = input.value.trim();
  if (!text || send.disabled) return;
  input.value = "";
  vscode.postMessage({ type: "send", text });
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
(document.getElementById("new") as HTMLButtonElement).addEventListener("click", () => vscode.postMessage({ type: "newThread" }));
vscode.postMessage({ type: "ready" });
