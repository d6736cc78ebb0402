// LSP text edits applied to a string, for previewing a proposed change. Positions are in
// UTF-16 code units, which is what a JavaScript string indexes; lines end at \n, \r\n or \r.

export interface LspPosition { line: number; character: number }
export interface LspRange { start: LspPosition; end: LspPosition }
export interface LspTextEdit { range: LspRange; newText: string }

function lineStarts(text: string): number[] {
  const starts = [0];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 10 || (c === 13 && text.charCodeAt(i + 1) !== 10)) starts.push(i + 1);
  }
  return starts;
}

export function offsetAt(text: string, starts: number[], position: LspPosition): number {
  if (position.line >= starts.length) return text.length;
  const start = starts[position.line];
  let end = position.line + 1 < starts.length ? starts[position.line + 1] : text.length;
  if (end > start && text[end - 1] === "\n") end--;
  if (end > start && text[end - 1] === "\r") end--;
  return Math.min(start + position.character, end);
}

/** `text` with `edits` applied (edits are on the original text and must not overlap). */
export function applyTextEdits(text: string, edits: LspTextEdit[]): string {
  const starts = lineStarts(text);
  const spans = edits
    .map((e, index) => ({ start: offsetAt(text, starts, e.range.start), end: offsetAt(text, starts, e.range.end),
                          text: e.newText, index }))
    .sort((a, b) => a.start - b.start || a.end - b.end || a.index - b.index);
  for (let i = 1; i < spans.length; i++) {
    if (spans[i].start < spans[i - 1].end) throw new Error("overlapping text edits");
  }
  let out = "";
  let at = 0;
  for (const span of spans) {
    out += text.slice(at, span.start) + span.text;
    at = span.end;
  }
  return out + text.slice(at);
}
