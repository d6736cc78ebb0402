// "Margin: Edit Selection…": ask for an instruction, get edit-ops from the server
// (margin/editOps), show the proposed change in VS Code's diff view, and apply it only through
// margin/applyOps, which checks that the file is still the text the model saw (or rebases
// exactly, or refuses, and says which).

import * as path from "path";
import * as vscode from "vscode";
import type { Margin } from "./extension";
import { applyMessage, describe } from "./pure/messages";
import { ChatRequestParams, EditOpsResult, METHODS } from "./pure/protocol.generated";
import { LspTextEdit, applyTextEdits } from "./pure/textEdits";
import { request } from "./requests";

export const PROPOSAL_SCHEME = "margin-proposal";

/** margin/editOps' `edit`: LSP's versioned WorkspaceEdit, as far as the preview reads it. */
interface ProposedEdit {
  documentChanges?: { textDocument: { uri: string; version: number | null }; edits: LspTextEdit[] }[];
}

type Decision = "apply" | "discard";

/** The proposed texts (read-only documents shown on the right of the diff) and the pending choice. */
export class ProposalView implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly texts = new Map<string, string>();
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private pending: ((decision: Decision) => void) | undefined;
  private readonly registration = vscode.workspace.registerTextDocumentContentProvider(PROPOSAL_SCHEME, this);

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? "";
  }

  show(uri: vscode.Uri, text: string): void {
    this.texts.set(uri.toString(), text);
    this.changed.fire(uri);
  }

  forget(uri: vscode.Uri): void {
    this.texts.delete(uri.toString());
  }

  /** Waits for Apply or Discard (the diff editor's buttons, the notification, or the commands);
   * `cancel` discards it. An earlier proposal still waiting is discarded, and its notification,
   * answered later, decides nothing. */
  async choose(question: Thenable<string | undefined>, cancel?: vscode.CancellationToken): Promise<Decision> {
    this.decide("discard");
    let mine: (decision: Decision) => void = () => undefined;
    const decided = new Promise<Decision>((resolve) => { mine = resolve; });
    this.pending = mine;
    const decideMine = (decision: Decision) => { if (this.pending === mine) this.decide(decision); };
    void vscode.commands.executeCommand("setContext", "margin.proposalOpen", true);
    void question.then((answer) => decideMine(answer === "Apply" ? "apply" : "discard"));
    const cancelled = cancel?.onCancellationRequested(() => decideMine("discard"));
    if (cancel?.isCancellationRequested) decideMine("discard");
    const decision = await decided;
    cancelled?.dispose();
    if (this.pending === undefined) void vscode.commands.executeCommand("setContext", "margin.proposalOpen", false);
    return decision;
  }

  decide(decision: Decision): void {
    const pending = this.pending;
    this.pending = undefined;
    pending?.(decision);
  }

  dispose(): void {
    this.decide("discard");
    this.registration.dispose();
    this.changed.dispose();
  }
}

export async function closeDiffs(uris: vscode.Uri[]): Promise<void> {
  const wanted = new Set(uris.map((u) => u.toString()));
  const tabs = vscode.window.tabGroups.all.flatMap((group) => group.tabs).filter((tab) =>
    tab.input instanceof vscode.TabInputTextDiff && wanted.has(tab.input.modified.toString()));
  if (tabs.length) await vscode.window.tabGroups.close(tabs);
}

export async function editSelection(margin: Margin, proposals: ProposalView): Promise<void> {
  const editor = margin.lastEditor();
  if (!editor) {
    void vscode.window.showWarningMessage("Margin: open a file and select the code to change first.");
    return;
  }
  const instruction = await vscode.window.showInputBox({
    title: "Margin: Edit Selection",
    prompt: editor.selection.isEmpty ? "What should Margin change in this file?" : "What should Margin change in the selection?",
    placeHolder: "e.g. handle an empty list",
    ignoreFocusOut: true,
  });
  if (!instruction?.trim()) return;

  const client = margin.client;
  const document = editor.document;
  const params: ChatRequestParams = {
    message: instruction.trim(),
    textDocument: { uri: client.code2ProtocolConverter.asUri(document.uri) },
    position: client.code2ProtocolConverter.asPosition(editor.selection.active),
  };
  if (!editor.selection.isEmpty) params.selection = client.code2ProtocolConverter.asRange(editor.selection);

  let result: EditOpsResult;
  try {
    result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: "Margin is preparing the change…", cancellable: true },
      (_, cancel) => margin.status.busy((busy) => {
        cancel.onCancellationRequested(() => margin.status.cancel());
        return request(client, METHODS.editOps, params, busy);
      }));
  } catch (error) {
    void vscode.window.showErrorMessage(`Margin: ${describe(error)}`);
    return;
  }
  const changes = (result.edit as ProposedEdit | null | undefined)?.documentChanges ?? [];
  if (!result.ops.length || !changes.length) {
    void vscode.window.showWarningMessage(`Margin: ${result.assistantMessage || "no change was proposed."}`);
    return;
  }

  // One diff per file: the text now on the left, the proposal on the right.
  const shown: vscode.Uri[] = [];
  for (const change of changes) {
    const uri = client.protocol2CodeConverter.asUri(change.textDocument.uri);
    const current = await vscode.workspace.openTextDocument(uri);
    const proposal = vscode.Uri.from({ scheme: PROPOSAL_SCHEME, path: uri.path, query: `v=${Date.now()}` });
    proposals.show(proposal, applyTextEdits(current.getText(), change.edits));
    shown.push(proposal);
    const name = path.basename(uri.path);
    await vscode.commands.executeCommand("vscode.diff", uri, proposal, `${name} ↔ Margin's proposal`, { preview: false });
  }
  const changedSince = changes.some((c) => {
    const open = vscode.workspace.textDocuments.find((d) => d.uri.toString() === client.protocol2CodeConverter.asUri(c.textDocument.uri).toString());
    return open !== undefined && c.textDocument.version !== null && open.version !== c.textDocument.version;
  });
  const note = changedSince ? " (The file changed while Margin worked; applying will check it.)" : "";
  const decision = await proposals.choose(vscode.window.showInformationMessage(
    `Margin: ${result.assistantMessage}${note}`, "Apply", "Discard"));
  await closeDiffs(shown);
  shown.forEach((u) => proposals.forget(u));
  if (decision === "discard") return;

  try {
    const applied = await request(client, METHODS.applyOps, {
      ops: result.ops, baseFingerprints: result.baseFingerprints, textDocument: params.textDocument,
      selection: params.selection, position: params.position,
    });
    const message = applyMessage(applied, (uri) => path.basename(client.protocol2CodeConverter.asUri(uri).path));
    if (message.ok) void vscode.window.showInformationMessage(message.text);
    else void vscode.window.showWarningMessage(message.text);
  } catch (error) {
    void vscode.window.showErrorMessage(`Margin: ${describe(error)}`);
  }
}
