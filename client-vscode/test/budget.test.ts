import { test } from "node:test";
import assert from "node:assert/strict";
import { budgetView } from "../src/pure/budget";

const budget = {
  contextWindow: 4096, reservedOutput: 1024, limit: 2974, total: 2000, counted: 2048,
  tokenizer: { name: "llama.cpp", exact: true },
  sections: [
    { name: "system", tokens: 300, kept: 1, dropped: [] },
    { name: "history", tokens: 1500, kept: 4, dropped: [{ item: "turn 3", reason: "older than the kept history" }] },
    { name: "files", tokens: 0, kept: 0, dropped: [] },
    { name: "message", tokens: 200, kept: 1, dropped: [] },
  ],
};

test("the bar shows each non-empty section and the reserved reply as shares of the window", () => {
  const view = budgetView(budget);
  assert.deepEqual(view.segments.map((s) => [s.name, s.tokens]), [
    ["system", 300], ["history", 1500], ["message", 200], ["reserved for the reply", 1024]]);
  assert.equal(view.segments[1].percent, (100 * 1500) / 4096);
  assert.equal(view.used, 2048);  // the whole prompt as counted, not the engine's sum
  assert.equal(view.usedPercent, 50);
  assert.equal(view.label, "2,048 / 4,096 tokens · llama.cpp (exact)");
  assert.match(view.detail[1], /history: 1,500; dropped turn 3 \(older than the kept history\)/);
});

test("an approximate tokenizer says so, and an uncounted prompt shows the engine's total", () => {
  const view = budgetView({ ...budget, counted: 0, tokenizer: { name: "heuristic", exact: false } });
  assert.equal(view.used, 2000);
  assert.match(view.label, /heuristic \(approximate\)$/);
});
