// What the next-edit display needs, free of VS Code: the lines an edit makes (shown beside the
// text it replaces) and what Tab does with a suggestion shown.

import type { LspPosition, LspTextEdit } from "./textEdits";

/** The lines `edit` makes of the lines it touches: the start line up to the edit, its new text,
 * the end line after it. `lines` are the document's lines (no line breaks). */
export function madeLines(lines: string[], edit: LspTextEdit): string[] {
  const first = lines[edit.range.start.line] ?? "";
  const last = lines[edit.range.end.line] ?? "";
  const made = first.slice(0, edit.range.start.character) + edit.newText + last.slice(edit.range.end.character);
  return made.split(/\r\n|\r|\n/);
}

/** Tab with a next edit shown: jump to it from another line, accept it on its line. */
export function tabAction(cursorLine: number, jumpTo: LspPosition): "jump" | "accept" {
  return cursorLine === jumpTo.line ? "accept" : "jump";
}

/** Whether every edit lies on the cursor's line at or after the cursor: VS Code's own ghost text
 * shows such an edit (the server answers it as an inline completion item), so it is not drawn a
 * second time beside the line. */
export function nearCursor(cursor: LspPosition, edits: LspTextEdit[]): boolean {
  return edits.length > 0 && edits.every((edit) => edit.range.start.line === cursor.line
    && edit.range.end.line === cursor.line && edit.range.start.character >= cursor.character
    && !/[\r\n]/.test(edit.newText));
}
