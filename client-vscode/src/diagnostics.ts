// Forwards the problems VS Code shows in the workspace's documents to the server
// (margin/diagnostics), for the agent's `diagnostics` tool: every problem but Margin's own,
// whenever a document's problems change (gathered for a moment, then sent per document), and
// all of them whenever the server (re)starts.

import * as vscode from "vscode";
import { State } from "vscode-languageclient/node";
import type { Margin } from "./extension";
import { diagnosticsParams } from "./pure/diagnostics";

export const DIAGNOSTICS_NOTIFICATION = "margin/diagnostics";
const GATHER_MS = 250;

export class DiagnosticsForwarder implements vscode.Disposable {
  private readonly pending = new Set<string>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(private readonly margin: Margin) {
    this.subscriptions.push(vscode.languages.onDidChangeDiagnostics((event) => {
      for (const uri of event.uris) if (this.inWorkspace(uri)) this.pending.add(uri.toString());
      this.schedule();
    }));
  }

  /** Watches a (new) language client: every workspace document's problems go to it once it runs. */
  watch(client: Margin["client"]): vscode.Disposable {
    return client.onDidChangeState((event) => {
      if (event.newState !== State.Running) return;
      for (const [uri] of vscode.languages.getDiagnostics()) if (this.inWorkspace(uri)) this.pending.add(uri.toString());
      this.schedule();
    });
  }

  private inWorkspace(uri: vscode.Uri): boolean {
    return uri.scheme === "file" && vscode.workspace.getWorkspaceFolder(uri) !== undefined;
  }

  private schedule(): void {
    if (this.timer || this.pending.size === 0) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, GATHER_MS);
  }

  private async flush(): Promise<void> {
    const client = this.margin.client;
    if (!client.isRunning()) return;  // sent in full when it runs again
    const uris = [...this.pending];
    this.pending.clear();
    for (const text of uris) {
      const uri = vscode.Uri.parse(text);
      const params = diagnosticsParams(client.code2ProtocolConverter.asUri(uri), vscode.languages.getDiagnostics(uri));
      try {
        await client.sendNotification(DIAGNOSTICS_NOTIFICATION, params);
      } catch (error) {
        this.margin.output.debug(`margin/diagnostics not sent for ${text}: ${error}`);
      }
    }
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.subscriptions.forEach((s) => s.dispose());
  }
}
