import { test } from "node:test";
import assert from "node:assert/strict";
import { applyMessage, statusText } from "../src/pure/messages";

test("apply results are explained: applied, rebased, stale, refused", () => {
  assert.deepEqual(applyMessage({ applied: true, rebased: false, staleFiles: [] }),
    { ok: true, text: "Margin applied the change." });
  assert.match(applyMessage({ applied: true, rebased: true, staleFiles: [] }).text, /moved onto your edits exactly/);
  const stale = applyMessage({ applied: false, rebased: false, staleFiles: ["file:///ws/a.py"] }, (u) => u.slice(11));
  assert.equal(stale.ok, false);
  assert.match(stale.text, /^Not applied: a\.py changed where the change goes/);
  assert.equal(applyMessage({ applied: false, rebased: false, staleFiles: [], failureReason: "The editor refused the edit." }).text,
    "Not applied: The editor refused the edit.");
});

test("the status bar names the model and the last request's share of the window", () => {
  assert.equal(statusText({ model: "gemma", usedPercent: 42, contextWindow: 4096, busy: false, running: true }).text,
    "$(comment-discussion) gemma · 42%");
  assert.match(statusText({ model: "gemma", usedPercent: 42, contextWindow: 4096, busy: false, running: true }).tooltip,
    /4,096-token window; the last request used 42%/);
  assert.match(statusText({ model: "gemma", version: "0.1.0", busy: false, running: true }).tooltip, /\(Margin 0\.1\.0\)$/);
  assert.equal(statusText({ busy: true, running: true }).text, "$(sync~spin) Margin");
  assert.match(statusText({ busy: true, running: true }).tooltip, /Click to cancel/);
  assert.equal(statusText({ busy: false, running: false }).text, "$(error) Margin");
});
