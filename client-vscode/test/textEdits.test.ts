import { test } from "node:test";
import assert from "node:assert/strict";
import { applyTextEdits } from "../src/pure/textEdits";

const at = (line: number, character: number) => ({ line, character });

test("edits apply at UTF-16 positions, around emoji and CRLF", () => {
  const text = "a = '😀'\r\nb = 2\r\nc = 3\r\n";
  const out = applyTextEdits(text, [
    { range: { start: at(0, 5), end: at(0, 7) }, newText: "✨" },  // the emoji is two code units
    { range: { start: at(1, 4), end: at(1, 99) }, newText: "20" },  // past the end: the line's end
    { range: { start: at(3, 0), end: at(3, 0) }, newText: "d = 4\r\n" },
  ]);
  assert.equal(out, "a = '✨'\r\nb = 20\r\nc = 3\r\nd = 4\r\n");
});

test("edits are applied on the original text whatever their order, and overlaps are refused", () => {
  const text = "one\ntwo\nthree\n";
  const edits = [
    { range: { start: at(2, 0), end: at(3, 0) }, newText: "" },
    { range: { start: at(0, 0), end: at(0, 3) }, newText: "ONE" },
  ];
  assert.equal(applyTextEdits(text, edits), "ONE\ntwo\n");
  assert.throws(() => applyTextEdits(text, [
    { range: { start: at(0, 0), end: at(1, 2) }, newText: "x" },
    { range: { start: at(1, 0), end: at(1, 1) }, newText: "y" },
  ]), /overlapping/);
});
