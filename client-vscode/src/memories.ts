// "Margin: Remember…" and "Margin: Memories": facts the user pins for Margin to keep in mind,
// for this workspace folder or every workspace (margin/remember), listed newest first with a
// Forget button on each (margin/memories, margin/forget).

import * as vscode from "vscode";
import type { Margin } from "./extension";
import { describe } from "./pure/messages";
import { MemoryItem, memoriesTitle, memoryItems, memoryProblem, rememberParams, scopeChoices } from "./pure/memories";
import { METHODS } from "./pure/protocol.generated";
import { request } from "./requests";

const FORGET: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon("trash"), tooltip: "Forget" };
const ADD: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon("add"), tooltip: "Remember…" };

type Item = vscode.QuickPickItem & { id: string };

/** The document whose workspace folder is meant: the editor the user last worked in. */
function activeDocument(margin: Margin): vscode.TextDocument | undefined {
  return margin.lastEditor()?.document ?? vscode.window.activeTextEditor?.document;
}

export async function remember(margin: Margin): Promise<boolean> {
  const text = await vscode.window.showInputBox({
    title: "Margin: Remember",
    prompt: "A fact for Margin to keep in mind, such as \"we use pytest, never unittest\"",
    validateInput: (value) => memoryProblem(value),
  });
  if (text === undefined) return false;
  const document = activeDocument(margin);
  const folder = (document && vscode.workspace.getWorkspaceFolder(document.uri)) ?? vscode.workspace.workspaceFolders?.[0];
  const choices = scopeChoices(folder?.name);
  const choice = choices.length === 1 ? choices[0] :
    await vscode.window.showQuickPick(choices, { title: "Margin: Remember it for…", placeHolder: text.trim() });
  if (!choice) return false;
  try {
    const made = await request(margin.client, METHODS.remember,
      rememberParams(text, choice.scope, document?.uri.toString()));
    const where = choice.scope === "global" ? "in every workspace" : `in ${folder?.name ?? "this workspace"}`;
    void vscode.window.showInformationMessage(`Margin will keep that in mind ${where} (memory ${made.id}).`);
    return true;
  } catch (error) {
    void vscode.window.showErrorMessage(`Margin: ${describe(error)}`);
    return false;
  }
}

/** The memories this workspace sees, newest first; each with a Forget button, and a second
 * step to forget the one chosen. */
export async function showMemories(margin: Margin): Promise<void> {
  const pick = vscode.window.createQuickPick<Item>();
  pick.placeholder = "Filter; the trash button forgets a memory, Enter offers to forget it";
  pick.matchOnDetail = true;
  pick.buttons = [ADD];
  const params = () => {
    const document = activeDocument(margin);
    return document?.uri.scheme === "file" ? { textDocument: { uri: document.uri.toString() } } : {};
  };
  const load = async (): Promise<void> => {
    pick.busy = true;
    try {
      const result = await request(margin.client, METHODS.memories, params());
      pick.title = memoriesTitle(result);
      pick.items = memoryItems(result.memories, Date.now() / 1000)
        .map((item: MemoryItem) => ({ ...item, buttons: [FORGET] }));
    } catch (error) {
      pick.title = `Margin: ${describe(error)}`;
    } finally {
      pick.busy = false;
    }
  };
  const forget = async (item: Item): Promise<void> => {
    try {
      await request(margin.client, METHODS.forget, { id: item.id });
    } catch (error) {
      void vscode.window.showErrorMessage(`Margin: ${describe(error)}`);
    }
    await load();
  };
  pick.onDidTriggerItemButton((event) => void forget(event.item));
  pick.onDidTriggerButton(async () => {
    pick.hide();
    if (await remember(margin)) await showMemories(margin);
  });
  let asking = false; // the second step hides the list for a moment: it comes back after
  pick.onDidAccept(async () => {
    const [item] = pick.selectedItems;
    if (!item) return;
    asking = true;
    const answer = await vscode.window.showQuickPick([{ label: "$(trash) Forget", forget: true },
      { label: "$(close) Keep", forget: false }], { title: `Margin: forget "${item.label}"?` });
    asking = false;
    pick.show();
    if (answer?.forget) await forget(item);
  });
  pick.onDidHide(() => { if (!asking) pick.dispose(); });
  pick.show();
  await load();
}
