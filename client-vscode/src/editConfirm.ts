// Confirmations of the server's edits that need one (the agent's, and with margin.confirmEdits
// every edit of Margin's): workspace/applyEdit with change annotations marked
// `needsConfirmation`. VS Code would put them in its Refactor Preview with every change
// unticked, where Apply applies nothing unless the person ticks each change first; instead the
// change is shown as Edit Selection… shows a proposal: VS Code's diff view (the document now on
// the left, after the edit on the right) and a notification, Apply or Discard (also the ✓ and
// discard buttons in the diff's title bar). Apply applies the edit as the server sent it, on the
// document's version it names; Discard answers the server `applied: false`. With no answer
// within margin.agentConfirmTimeoutS (when the server takes it as a no), or when the agent's
// turn ends, the question is dropped and answered no.

import * as path from "path";
import * as vscode from "vscode";
import type { ApplyWorkspaceEditParams, ApplyWorkspaceEditResult } from "vscode-languageclient/node";
import { CancellationToken } from "vscode-languageclient/node";
import { ProposalView, PROPOSAL_SCHEME, closeDiffs } from "./editSelection";
import { ConfirmableEdit, asksConfirmation, confirmationLabel, confirmationQuestion, confirmed, proposedTexts } from "./pure/agent";

type Next = (params: ApplyWorkspaceEditParams, token: CancellationToken) => unknown;

/** Seconds the server waits for an answer (margin.agentConfirmTimeoutS; unset: 120). */
function confirmTimeoutS(): number {
  const set = vscode.workspace.getConfiguration("margin").get<number | null>("agentConfirmTimeoutS");
  return typeof set === "number" && set > 0 ? set : 120;
}

export class EditConfirmations implements vscode.Disposable {
  private readonly waiting = new Set<vscode.CancellationTokenSource>();
  private readonly asked = new vscode.EventEmitter<string>();
  /** fired with the question whenever an edit waits for the person */
  readonly onDidAsk = this.asked.event;

  constructor(private readonly proposals: ProposalView) {}

  /** The languageclient's middleware.workspace.handleApplyEdit. */
  async handle(params: ApplyWorkspaceEditParams, next: Next): Promise<ApplyWorkspaceEditResult> {
    const edit = params.edit as ConfirmableEdit;
    if (!asksConfirmation(edit)) return (await next(params, CancellationToken.None)) as ApplyWorkspaceEditResult;
    // On a version the document has left (the person typed since the server read it) it would
    // not apply: not asked.
    const openVersion = (uri: string) => vscode.workspace.textDocuments
      .find((d) => d.uri.toString() === vscode.Uri.parse(uri).toString())?.version;
    const stale = (edit.documentChanges ?? []).find((c) => "textDocument" in c && typeof c.textDocument.version === "number" &&
      openVersion(c.textDocument.uri) !== undefined && openVersion(c.textDocument.uri) !== c.textDocument.version);
    if (stale && "textDocument" in stale) {
      return { applied: false, failureReason: `${path.basename(vscode.Uri.parse(stale.textDocument.uri).path)} changed since it was read.` };
    }
    const source = new vscode.CancellationTokenSource();
    this.waiting.add(source);
    // A second short of the server's deadline: after it the server has taken it as a no.
    const timer = setTimeout(() => source.cancel(), Math.max(1, confirmTimeoutS() - 1) * 1000);
    try {
      const decision = await this.ask(edit, source.token);
      if (decision !== "apply") {
        return { applied: false, failureReason: source.token.isCancellationRequested ?
          "No answer in time: the change was not applied." : "The person discarded the change." };
      }
      return (await next({ ...params, edit: confirmed(edit) as typeof params.edit }, CancellationToken.None)) as ApplyWorkspaceEditResult;
    } finally {
      clearTimeout(timer);
      this.waiting.delete(source);
      source.dispose();
    }
  }

  /** Drops every question still waiting (answered no): the agent's turn has ended. */
  dropAll(): void {
    for (const source of this.waiting) source.cancel();
  }

  private async ask(edit: ConfirmableEdit, cancel: vscode.CancellationToken): Promise<"apply" | "discard"> {
    const label = confirmationLabel(edit);
    const texts = new Map<string, string>();
    const uris = [...(edit.documentChanges ?? []).flatMap((c) => ("textDocument" in c ? [c.textDocument.uri] : [])),
                  ...Object.keys(edit.changes ?? {})];
    try {
      for (const uri of uris) texts.set(uri, (await vscode.workspace.openTextDocument(vscode.Uri.parse(uri))).getText());
    } catch {
      // a document that cannot be opened: asked without a diff
    }
    const proposed = proposedTexts(edit, texts);
    const name = (uri: string) => path.basename(vscode.Uri.parse(uri).path);
    if (!proposed) {
      const question = `${label} asks to change ${uris.map(name).join(", ") || "files"}. Apply it?`;
      this.asked.fire(question);
      return this.proposals.choose(vscode.window.showInformationMessage(question, "Apply", "Discard"), cancel);
    }
    const shown: vscode.Uri[] = [];
    for (const change of proposed) {
      const uri = vscode.Uri.parse(change.uri);
      const proposal = vscode.Uri.from({ scheme: PROPOSAL_SCHEME, path: uri.path, query: `v=${Date.now()}` });
      this.proposals.show(proposal, change.text);
      shown.push(proposal);
      // Beside the document's own editor (not over the chat panel, which keeps showing the steps).
      const column = vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === uri.toString())?.viewColumn;
      await vscode.commands.executeCommand("vscode.diff", uri, proposal, `${name(change.uri)} ↔ ${label}`,
        { preview: false, preserveFocus: true, viewColumn: column ?? vscode.ViewColumn.One });
    }
    const question = confirmationQuestion(label, proposed, name);
    this.asked.fire(question);
    try {
      return await this.proposals.choose(vscode.window.showInformationMessage(question, "Apply", "Discard"), cancel);
    } finally {
      await closeDiffs(shown);
      shown.forEach((u) => this.proposals.forget(u));
    }
  }

  dispose(): void {
    this.dropAll();
    this.asked.dispose();
  }
}
