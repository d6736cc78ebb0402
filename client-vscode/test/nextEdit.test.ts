import { test } from "node:test";
import assert from "node:assert/strict";
import { madeLines, tabAction } from "../src/pure/nextEdit";

const at = (line: number, character: number) => ({ line, character });

test("an edit's lines: the line before it, the new text, the line after it", () => {
  const lines = ["def area(radius):", "    return math.pi * r * r"];
  assert.deepEqual(madeLines(lines, { range: { start: at(1, 22), end: at(1, 26) }, newText: "adius * radius" }),
    ["    return math.pi * radius * radius"]);
  assert.deepEqual(madeLines(lines, { range: { start: at(0, 17), end: at(1, 0) }, newText: "\n    assert radius > 0\n" }),
    ["def area(radius):", "    assert radius > 0", "    return math.pi * r * r"]);
});

test("Tab jumps to a next edit from another line and accepts it on its own", () => {
  assert.equal(tabAction(0, at(4, 4)), "jump");
  assert.equal(tabAction(4, at(4, 4)), "accept");
});
