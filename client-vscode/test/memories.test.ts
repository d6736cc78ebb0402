import { test } from "node:test";
import assert from "node:assert/strict";
import { ago, memoriesTitle, memoryItems, memoryProblem, rememberParams, scopeChoices } from "../src/pure/memories";

const NOW = 1_700_000_000;

test("the list shows each memory's first line, its scope and its age, in the server's order", () => {
  const items = memoryItems([
    { id: "7", text: "the API base is /v2", scope: "global", created: NOW - 90 },
    { id: "3", text: "we use pytest\nnever unittest", scope: "workspace", created: NOW - 3 * 86400 },
  ], NOW);
  assert.deepEqual(items, [
    { id: "7", label: "the API base is /v2", description: "global", detail: "remembered 1 minute ago" },
    { id: "3", label: "we use pytest", description: "this workspace", detail: "never unittest · remembered 3 days ago" },
  ]);
});

test("ages read as a person says them", () => {
  assert.equal(ago(NOW - 5, NOW), "just now");
  assert.equal(ago(NOW - 7200, NOW), "2 hours ago");
  assert.equal(ago(NOW + 10, NOW), "just now"); // a clock a little ahead
  assert.equal(ago(NOW - 40 * 86400, NOW), "2023-10-05");
});

test("remember checks the text as the server does, in characters", () => {
  assert.match(memoryProblem("  ") ?? "", /Write the fact/);
  assert.equal(memoryProblem("😀".repeat(2000)), undefined); // 4,000 UTF-16 units, 2,000 characters
  assert.equal(memoryProblem("x".repeat(2001)), "A memory holds at most 2,000 characters; this one has 2,001.");
});

test("remember offers this folder first, and only a global memory without a folder", () => {
  assert.deepEqual(scopeChoices("api").map((c) => c.scope), ["workspace", "global"]);
  assert.deepEqual(scopeChoices(undefined).map((c) => c.scope), ["global"]);
});

test("remember sends the active file, never an untitled or virtual document", () => {
  assert.deepEqual(rememberParams(" we use pytest ", "workspace", "file:///ws/a.py"),
    { text: "we use pytest", scope: "workspace", textDocument: { uri: "file:///ws/a.py" } });
  assert.deepEqual(rememberParams("x", "global", "untitled:Untitled-1"), { text: "x", scope: "global" });
  assert.deepEqual(rememberParams("x", "global"), { text: "x", scope: "global" });
});

test("the title counts the memories and says when they are not saved", () => {
  assert.equal(memoriesTitle({ memories: [], persistent: true }), "Margin: No memories yet");
  const one = { id: "1", text: "x", scope: "global" as const, created: NOW };
  assert.equal(memoriesTitle({ memories: [one], persistent: false }),
    "Margin: 1 memory (not saved: the database cannot be used)");
});
