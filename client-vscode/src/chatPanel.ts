// The chat panel: a webview that streams Margin's replies (LSP partial results) as Markdown,
// shows the thread's history, and a budget bar for the last request. In Agent mode (the
// panel's Chat / Agent toggle, or "Margin: Ask the Agent…") a message is a task for
// margin/agent: each step streams in as a line (the call and how it went, what the model was
// told), then the answer and how the turn stopped; Stop cancels the turn, its completed steps
// kept. Its Content Security Policy allows only the extension's own script (by nonce) and
// stylesheet; nothing remote.

import * as crypto from "crypto";
import * as vscode from "vscode";
import { ProgressType } from "vscode-languageclient/node";
import type { Margin } from "./extension";
import { agentLine, agentParams, agentSummary } from "./pure/agent";
import { budgetView } from "./pure/budget";
import { describe } from "./pure/messages";
import { AgentEvent, ChatDelta, ChatRequestParams, HistoryParams, METHODS } from "./pure/protocol.generated";
import { request } from "./requests";

export type Mode = "chat" | "agent";

type FromWebview =
  | { type: "ready" }
  | { type: "send"; text: string; mode?: Mode }
  | { type: "cancel" }
  | { type: "newThread" }
  | { type: "mode"; mode: Mode };

const REQUEST_CANCELLED = -32800;
const delta = new ProgressType<ChatDelta>();
const agentEvent = new ProgressType<AgentEvent>();

export class ChatPanel {
  private static current: ChatPanel | undefined;
  private threadId: string | undefined;
  /** the agent thread the panel's agent turns go on in (a new one until the first turn ends) */
  private agentThreadId: string | undefined;
  private mode: Mode = "chat";
  /** the panel's running request (a chat reply or an agent turn): Cancel / Stop cancels it */
  private running: vscode.CancellationTokenSource | undefined;
  /** resolved once the webview's script listens and the thread's history is shown */
  private readonly ready: Promise<void>;
  private markReady: () => void = () => undefined;

  /** The open panel, if any. */
  static get open(): ChatPanel | undefined {
    return ChatPanel.current;
  }

  /** Opens the panel in Agent mode and gives the agent `task`. */
  static async askAgent(context: vscode.ExtensionContext, margin: Margin, task: string): Promise<void> {
    const panel = ChatPanel.show(context, margin);
    await panel.ready;
    if (panel.running) {
      void vscode.window.showWarningMessage("Margin is still working in the chat panel: stop it first (Stop), then ask again.");
      return;
    }
    panel.setMode("agent");
    await panel.agent(task);
  }

  static show(context: vscode.ExtensionContext, margin: Margin): ChatPanel {
    if (ChatPanel.current) {
      ChatPanel.current.panel.reveal(undefined, false);
      return ChatPanel.current;
    }
    ChatPanel.current = new ChatPanel(context, margin);
    return ChatPanel.current;
  }

  private readonly panel: vscode.WebviewPanel;

  private constructor(context: vscode.ExtensionContext, private readonly margin: Margin) {
    const roots = [vscode.Uri.joinPath(context.extensionUri, "dist"), vscode.Uri.joinPath(context.extensionUri, "media")];
    this.panel = vscode.window.createWebviewPanel("margin.chat", "Margin Chat",
      { viewColumn: vscode.ViewColumn.Beside, preserveFocus: false },
      { enableScripts: true, retainContextWhenHidden: true, localResourceRoots: roots });
    this.ready = new Promise((resolve) => { this.markReady = resolve; });
    this.panel.webview.html = this.html(context.extensionUri);
    this.panel.webview.onDidReceiveMessage((message: FromWebview) => this.receive(message));
    this.panel.onDidDispose(() => {
      ChatPanel.current = undefined;
      this.running?.cancel();
    });
  }

  /** Whether an agent turn is running in the panel. */
  get agentRunning(): boolean {
    return this.running !== undefined && this.mode === "agent";
  }

  /** A line for the running agent turn that is not one of the server's events (e.g. that a
   * confirmation waits in the editor). */
  agentNote(text: string): void {
    this.post({ type: "agentNote", text });
  }

  private setMode(mode: Mode): void {
    this.mode = mode;
    this.post({ type: "mode", mode });
  }

  private post(message: Record<string, unknown>): void {
    void this.panel.webview.postMessage(message);
  }

  private async receive(message: FromWebview): Promise<void> {
    if (message.type === "ready") {
      await this.loadHistory();
      this.post({ type: "mode", mode: this.mode });
      this.markReady();
    } else if (message.type === "send") {
      if (message.mode) this.mode = message.mode;
      if (this.mode === "agent") await this.agent(message.text);
      else await this.send(message.text);
    } else if (message.type === "cancel") this.running?.cancel();
    else if (message.type === "newThread") await this.newThread();
    else if (message.type === "mode") this.mode = message.mode;
  }

  /** Runs `work` as the panel's request: Cancel / Stop in the panel, or the status bar, cancels it. */
  private async run<T>(work: (token: vscode.CancellationToken) => Thenable<T>): Promise<T> {
    const source = new vscode.CancellationTokenSource();
    this.running = source;
    try {
      return await this.margin.status.busy(async (busy) => {
        const linked = busy.onCancellationRequested(() => source.cancel());
        try {
          return await work(source.token);
        } finally {
          linked.dispose();
        }
      });
    } finally {
      if (this.running === source) this.running = undefined;
      source.dispose();
    }
  }

  private document(): { uri: string } | undefined {
    const editor = this.margin.lastEditor();
    return editor ? { uri: this.margin.client.code2ProtocolConverter.asUri(editor.document.uri) } : undefined;
  }

  async loadHistory(): Promise<void> {
    try {
      const where: HistoryParams = this.threadId ? { threadId: this.threadId } :
        this.document() ? { textDocument: this.document() } : {};
      const history = await request(this.margin.client, METHODS.history, where);
      this.threadId = history.threadId;
      this.post({ type: "history", messages: history.messages });
    } catch (error) {
      this.post({ type: "error", message: `Could not load the thread: ${describe(error)}` });
    }
  }

  async newThread(): Promise<void> {
    if (this.mode === "agent") {
      // The next task starts a new agent thread (the server makes it with the turn).
      this.agentThreadId = undefined;
      this.post({ type: "history", messages: [] });
      return;
    }
    try {
      const document = this.document();
      const created = await request(this.margin.client, METHODS.newThread, document ? { textDocument: document } : {});
      this.threadId = created.threadId;
      this.post({ type: "history", messages: [] });
    } catch (error) {
      this.post({ type: "error", message: `Could not start a new thread: ${describe(error)}` });
    }
  }

  async send(text: string): Promise<void> {
    const client = this.margin.client;
    const editor = this.margin.lastEditor();
    const token = `margin-chat-${crypto.randomUUID()}`;
    const params: ChatRequestParams = { message: text, partialResultToken: token };
    if (editor) {
      params.textDocument = { uri: client.code2ProtocolConverter.asUri(editor.document.uri) };
      if (!editor.selection.isEmpty) params.selection = client.code2ProtocolConverter.asRange(editor.selection);
    }
    if (this.threadId) params.threadId = this.threadId;
    this.post({ type: "user", text });
    this.post({ type: "start" });
    const progress = client.onProgress(delta, token, (value) => this.post({ type: "delta", text: value.delta }));
    try {
      const result = await this.run((cancel) => request(client, METHODS.chat, params, cancel));
      this.threadId = result.threadId;
      this.margin.status.lastBudget(result.budget);
      this.post({ type: "done", reply: result.reply, message: result.message ?? null, budget: budgetView(result.budget) });
    } catch (error) {
      const cancelled = (error as { code?: number }).code === REQUEST_CANCELLED;
      this.post({ type: "error", message: cancelled ? "Cancelled; the thread is unchanged." : describe(error) });
    } finally {
      progress.dispose();
    }
  }

  /** Gives the agent a task (margin/agent) on the last editor's document and selection, in the
   * panel's agent thread, and shows its steps as they stream in. */
  async agent(task: string): Promise<void> {
    const client = this.margin.client;
    const editor = this.margin.lastEditor();
    const token = `margin-agent-${crypto.randomUUID()}`;
    const params = agentParams(task, {
      uri: editor ? client.code2ProtocolConverter.asUri(editor.document.uri) : undefined,
      selection: editor && !editor.selection.isEmpty ? client.code2ProtocolConverter.asRange(editor.selection) : undefined,
      threadId: this.agentThreadId,
      partialResultToken: token,
    });
    this.post({ type: "user", text: params.task, mode: "agent" });
    this.post({ type: "agentStart" });
    const progress = client.onProgress(agentEvent, token, (event) => {
      const line = agentLine(event);
      if (line) this.post({ type: "agentLine", line });
    });
    try {
      const result = await this.run((cancel) => request(client, METHODS.agent, params, cancel));
      this.agentThreadId = result.threadId;
      this.post({ type: "agentDone", answer: result.answer, stopped: result.stopped, summary: agentSummary(result) });
    } catch (error) {
      const cancelled = (error as { code?: number }).code === REQUEST_CANCELLED;
      this.post({ type: "agentStopped", message: cancelled ?
        "Stopped. The steps that completed are kept in the agent thread." : describe(error), cancelled });
    } finally {
      progress.dispose();
      this.margin.confirmations.dropAll();  // a question the ended turn left open is answered no
    }
  }

  private html(extensionUri: vscode.Uri): string {
    const webview = this.panel.webview;
    const nonce = crypto.randomBytes(16).toString("base64");
    const script = webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, "dist", "webview.js"));
    const style = webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, "media", "chat.css"));
    const csp = [
      "default-src 'none'",
      `img-src ${webview.cspSource} data:`,
      `style-src ${webview.cspSource}`,
      `font-src ${webview.cspSource}`,
      `script-src 'nonce-${nonce}'`,
    ].join("; ");
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${style}">
<title>Margin Chat</title>
</head>
<body>
<main id="log" role="log" aria-live="polite"></main>
<section id="budget" class="budget" hidden>
  <div class="bar" role="img"></div>
  <div class="label"></div>
  <div class="legend"></div>
</section>
<form id="form">
  <div class="modes" role="radiogroup" aria-label="Mode">
    <button type="button" id="mode-chat" class="mode" role="radio" aria-checked="true"
      title="Chat: Margin answers about your code">Chat</button>
    <button type="button" id="mode-agent" class="mode" role="radio" aria-checked="false"
      title="Agent: Margin reads, edits and runs commands in this folder, asking before every edit or command">Agent</button>
  </div>
  <textarea id="input" rows="3" placeholder="Ask Margin about your code (Enter sends, Shift+Enter adds a line)"></textarea>
  <div class="buttons">
    <button type="submit" id="send">Send</button>
    <button type="button" id="cancel" class="secondary" disabled>Cancel</button>
    <button type="button" id="new" class="secondary">New thread</button>
  </div>
</form>
<script nonce="${nonce}" src="${script}"></script>
</body>
</html>`;
  }
}
