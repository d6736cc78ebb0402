// The chat panel: a webview that streams Margin's replies (LSP partial results) as Markdown,
// shows the thread's history, and a budget bar for the last request. Its Content Security
// Policy allows only the extension's own script (by nonce) and stylesheet; nothing remote.

import * as crypto from "crypto";
import * as vscode from "vscode";
import { ProgressType } from "vscode-languageclient/node";
import type { Margin } from "./extension";
import { budgetView } from "./pure/budget";
import { describe } from "./pure/messages";
import { ChatDelta, ChatRequestParams, HistoryParams, METHODS } from "./pure/protocol.generated";
import { request } from "./requests";

type FromWebview = { type: "ready" } | { type: "send"; text: string } | { type: "cancel" } | { type: "newThread" };

const REQUEST_CANCELLED = -32800;
const delta = new ProgressType<ChatDelta>();

export class ChatPanel {
  private static current: ChatPanel | undefined;
  private threadId: string | undefined;

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
    this.panel.webview.html = this.html(context.extensionUri);
    this.panel.webview.onDidReceiveMessage((message: FromWebview) => this.receive(message));
    this.panel.onDidDispose(() => { ChatPanel.current = undefined; });
  }

  private post(message: Record<string, unknown>): void {
    void this.panel.webview.postMessage(message);
  }

  private async receive(message: FromWebview): Promise<void> {
    if (message.type === "ready") await this.loadHistory();
    else if (message.type === "send") await this.send(message.text);
    else if (message.type === "cancel") this.margin.status.cancel();
    else if (message.type === "newThread") await this.newThread();
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
      const result = await this.margin.status.busy((cancel) => request(client, METHODS.chat, params, cancel));
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
