// The status bar item: the chat model, how much of the window the last request used, and a
// busy state that cancels the running request when clicked.

import * as vscode from "vscode";
import { LanguageClient } from "vscode-languageclient/node";
import { budgetView } from "./pure/budget";
import { StatusState, statusText } from "./pure/messages";
import { Budget, METHODS, ProfileStatus } from "./pure/protocol.generated";
import { request } from "./requests";

export class StatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem("margin.status", vscode.StatusBarAlignment.Right, 100);
  private state: StatusState = { busy: false, running: false };
  private running?: vscode.CancellationTokenSource;

  constructor() {
    this.item.name = "Margin";
    this.render();
    this.item.show();
  }

  update(change: Partial<StatusState>): void {
    this.state = { ...this.state, ...change };
    this.render();
  }

  /** The model and window of the chat profile, from margin/status. */
  async refresh(client: LanguageClient): Promise<void> {
    try {
      const status = await request(client, METHODS.status, {});
      const chat: Partial<ProfileStatus> = status.profiles.chat ?? {};
      this.update({ running: true, model: chat.model, contextWindow: chat.contextWindow, version: status.version });
    } catch {
      this.update({ running: client.isRunning() });
    }
  }

  lastBudget(budget: Budget | undefined): void {
    if (budget) this.update({ usedPercent: budgetView(budget).usedPercent });
  }

  /** Marks Margin busy until `work` ends; clicking the item (or Margin: Cancel) cancels it. */
  async busy<T>(work: (token: vscode.CancellationToken) => Thenable<T>): Promise<T> {
    const source = new vscode.CancellationTokenSource();
    this.running = source;
    this.update({ busy: true });
    try {
      return await work(source.token);
    } finally {
      if (this.running === source) this.running = undefined;
      source.dispose();
      this.update({ busy: this.running !== undefined });
    }
  }

  cancel(): void {
    this.running?.cancel();
  }

  private render(): void {
    const { text, tooltip } = statusText(this.state);
    this.item.text = text;
    this.item.tooltip = tooltip;
    this.item.command = !this.state.running ? "margin.showOutput" : this.state.busy ? "margin.cancel" : "margin.openChat";
  }

  dispose(): void {
    this.running?.cancel();
    this.item.dispose();
  }
}
