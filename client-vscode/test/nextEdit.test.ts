import { test } from "node:test";
import assert from "node:assert/strict";
import { madeLines, nearCursor, tabAction } from "../src/pure/nextEdit";

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

test("an edit on the cursor's line after the cursor is near: VS Code's ghost text shows it", () => {
  const atEnd = { range: { start: { line: 4, character: 26 }, end: { line: 4, character: 26 } }, newText: " * scale" };
  assert.equal(nearCursor({ line: 4, character: 4 }, [atEnd]), true);
  assert.equal(nearCursor({ line: 3, character: 19 }, [atEnd]), false);  // another line: drawn beside it
  assert.equal(nearCursor({ line: 4, character: 30 }, [atEnd]), false);  // before the cursor
  assert.equal(nearCursor({ line: 4, character: 4 }, [{ ...atEnd, newText: "x\ny" }]), false);
  assert.equal(nearCursor({ line: 4, character: 4 }, []), false);
});
