// Next edits in VS Code. After a pause in typing, the server is asked for the next edit at the
// cursor (`margin/nextEdit`); an edit elsewhere is shown where it goes — the text it replaces
// struck through, the line it makes beside it — and Tab jumps to it, Tab again accepts it, Escape
// dismisses it. A suggestion goes as soon as the document changes, and is applied only to the
// version it was made for. An edit on the cursor's line, at or after the cursor, comes as an inline
// completion item, which VS Code shows as ghost text by itself: it is not drawn beside the line
// as well, and one drawn for another line gives way to the ghost text when the cursor reaches it.

import * as vscode from "vscode";
import type { LanguageClient } from "vscode-languageclient/node";
import { METHODS, NextEditResult } from "./pure/protocol.generated";
import { madeLines, nearCursor, tabAction } from "./pure/nextEdit";
import { request } from "./requests";

const SHOWN = "margin.nextEditShown";
const DEFAULT_PAUSE_MS = 400;

interface Shown {
  document: vscode.TextDocument;
  result: NextEditResult;
}

export class NextEdits implements vscode.Disposable {
  private readonly removed = vscode.window.createTextEditorDecorationType({
    backgroundColor: new vscode.ThemeColor("diffEditor.removedTextBackground"),
    textDecoration: "line-through",
  });
  private readonly added = vscode.window.createTextEditorDecorationType({
    after: {
      backgroundColor: new vscode.ThemeColor("diffEditor.insertedTextBackground"),
      margin: "0 0 0 2em",
    },
  });
  private shown: Shown | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private asked: vscode.CancellationTokenSource | undefined;
  private enabled: boolean | undefined;
  private readonly subscriptions: vscode.Disposable[];

  constructor(private readonly client: () => LanguageClient) {
    this.subscriptions = [
      this.removed, this.added,
      vscode.workspace.onDidChangeTextDocument((event) => this.changed(event)),
      vscode.window.onDidChangeActiveTextEditor(() => this.dismiss()),
      vscode.window.onDidChangeTextEditorSelection((event) => this.moved(event)),
      vscode.workspace.onDidChangeConfiguration((event) => {
        if (event.affectsConfiguration("margin")) this.enabled = undefined;
      }),
    ];
  }

  dispose(): void {
    this.dismiss();
    if (this.timer) clearTimeout(this.timer);
    for (const item of this.subscriptions) item.dispose();
  }

  /** The suggestion shown, for tests and commands: its edits and the version they are for. */
  current(): NextEditResult | undefined {
    return this.shown?.result;
  }

  dismiss(): void {
    this.asked?.cancel();
    this.shown = undefined;
    for (const editor of vscode.window.visibleTextEditors) {
      editor.setDecorations(this.removed, []);
      editor.setDecorations(this.added, []);
    }
    void vscode.commands.executeCommand("setContext", SHOWN, false);
  }

  /** Tab: jump to the edit from another line, accept it on its own line. */
  async tab(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    const shown = this.shown;
    if (!editor || !shown || editor.document !== shown.document || editor.document.version !== shown.result.version
        || !shown.result.jumpTo) {
      this.dismiss();
      return;
    }
    const jumpTo = shown.result.jumpTo;
    if (tabAction(editor.selection.active.line, jumpTo) === "jump") {
      const at = new vscode.Position(jumpTo.line, jumpTo.character);
      editor.selection = new vscode.Selection(at, at);
      editor.revealRange(new vscode.Range(at, at), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
      return;
    }
    this.dismiss();
    const edits = shown.result.edits;
    await editor.edit((builder) => {
      for (const edit of edits) {
        builder.replace(new vscode.Range(edit.range.start.line, edit.range.start.character,
          edit.range.end.line, edit.range.end.character), edit.newText);
      }
    }, { undoStopBefore: true, undoStopAfter: true });
  }

  /** The cursor moved onto the shown edit's line, before it: VS Code's ghost text shows it there. */
  private moved(event: vscode.TextEditorSelectionChangeEvent): void {
    const shown = this.shown;
    // The person's own moves only: Tab's jump puts the cursor on the edit to accept it there.
    const byPerson = event.kind === vscode.TextEditorSelectionChangeKind.Keyboard
      || event.kind === vscode.TextEditorSelectionChangeKind.Mouse;
    if (!shown || !byPerson || event.textEditor.document !== shown.document) return;
    const cursor = event.selections[0]?.active;
    if (cursor && nearCursor({ line: cursor.line, character: cursor.character }, shown.result.edits)) {
      this.dismiss();
      void vscode.commands.executeCommand("editor.action.inlineSuggest.trigger");
    }
  }

  private changed(event: vscode.TextDocumentChangeEvent): void {
    const editor = vscode.window.activeTextEditor;
    if (!editor || event.document !== editor.document || event.contentChanges.length === 0) return;
    this.dismiss();
    if (this.timer) clearTimeout(this.timer);
    const pause = vscode.workspace.getConfiguration("margin").get<number>("nextEditPauseMs") || DEFAULT_PAUSE_MS;
    this.timer = setTimeout(() => void this.ask(editor), pause);
  }

  private async isEnabled(): Promise<boolean> {
    if (this.enabled === undefined) {
      const status = await request(this.client(), METHODS.status, {});
      this.enabled = status.profiles.nextEdit?.enabled === true;
    }
    return this.enabled;
  }

  private async ask(editor: vscode.TextEditor): Promise<void> {
    const client = this.client();
    if (!client.isRunning() || vscode.window.activeTextEditor !== editor) return;
    try {
      if (!(await this.isEnabled())) return;
      const document = editor.document;
      const version = document.version;
      this.asked?.cancel();
      const asked = this.asked = new vscode.CancellationTokenSource();
      const position = editor.selection.active;
      const result = await request(client, METHODS.nextEdit, {
        textDocument: { uri: document.uri.toString(), version },
        position: { line: position.line, character: position.character },
      }, asked.token);
      if (asked.token.isCancellationRequested || document.version !== result.version || result.edits.length === 0
          || vscode.window.activeTextEditor !== editor) return;
      const cursor = editor.selection.active;
      if (nearCursor({ line: cursor.line, character: cursor.character }, result.edits)) {
        // On the cursor's line, after it: VS Code's ghost text shows it (an inline completion item).
        void vscode.commands.executeCommand("editor.action.inlineSuggest.trigger");
        return;
      }
      this.show(editor, result);
    } catch {
      // Cancelled, or the server could not answer: nothing to show (its log says why).
    }
  }

  private show(editor: vscode.TextEditor, result: NextEditResult): void {
    const lines = Array.from({ length: editor.document.lineCount }, (_, i) => editor.document.lineAt(i).text);
    const removed: vscode.Range[] = [];
    const added: vscode.DecorationOptions[] = [];
    for (const edit of result.edits) {
      const range = new vscode.Range(edit.range.start.line, edit.range.start.character,
        edit.range.end.line, edit.range.end.character);
      if (!range.isEmpty) removed.push(range);
      const made = madeLines(lines, edit);
      const end = editor.document.lineAt(edit.range.end.line).range.end;
      added.push({
        range: new vscode.Range(end, end),
        renderOptions: { after: { contentText: `Tab ⇥ ${made.join(" ⏎ ")}` } },
        hoverMessage: new vscode.MarkdownString().appendCodeblock(made.join("\n"), editor.document.languageId),
      });
    }
    editor.setDecorations(this.removed, removed);
    editor.setDecorations(this.added, added);
    this.shown = { document: editor.document, result };
    void vscode.commands.executeCommand("setContext", SHOWN, true);
  }
}
