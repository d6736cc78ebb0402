import { test } from "node:test";
import assert from "node:assert/strict";
import {
  ConfirmableEdit, agentLine, agentParams, agentSummary, asksConfirmation, callText, confirmationLabel, confirmationQuestion,
  confirmed, proposedTexts, statusMark, stoppedText,
} from "../src/pure/agent";
import type { AgentResult } from "../src/pure/protocol.generated";

test("a step begins with its prompt's tokens", () => {
  assert.deepEqual(agentLine({ kind: "step", step: 1, promptTokens: 1356 }),
    { kind: "step", step: 1, text: "Step 1", detail: "1,356 prompt tokens" });
  assert.equal(agentLine({ kind: "step", step: 2 })?.text, "Step 2");
});

test("the model's output streams as text; an empty piece shows nothing", () => {
  assert.deepEqual(agentLine({ kind: "text", step: 1, delta: "{\"tool\": \"read\"" }),
    { kind: "text", step: 1, text: "{\"tool\": \"read\"" });
  assert.equal(agentLine({ kind: "text", step: 1, delta: "" }), undefined);
});

test("a call is one line: what was called, its status, the result's first line", () => {
  const line = agentLine({ kind: "call", step: 1, tool: "read", args: { path: "calc.py" }, status: "done",
    pointer: "[t1 read calc.py]", summary: "\n  def add(a, b):\n    return a - b" });
  assert.deepEqual(line, { kind: "call", step: 1, status: "done", text: "read calc.py", detail: "def add(a, b):",
    pointer: "[t1 read calc.py]" });
  const refused = agentLine({ kind: "call", step: 2, tool: "edit", args: { path: "calc.py", old: "a - b", new: "a + b" },
    status: "refused", summary: "The person declined it" });
  assert.equal(refused?.kind === "call" && `${statusMark(refused.status)} ${refused.text}`, "⊘ edit calc.py");
  assert.equal(statusMark("done"), "✓");
  assert.equal(statusMark("failed"), "✗");
  assert.equal(statusMark("repeated"), "↻");
  assert.equal(statusMark("something new"), "•");
});

test("each tool's call reads as a few words", () => {
  assert.equal(callText("read", { path: "a.py", start: 3, end: 9 }), "read a.py:3-9");
  assert.equal(callText("read", { path: "a.py", start: 3 }), "read a.py:3-");
  assert.equal(callText("list", {}), "list .");
  assert.equal(callText("search", { query: "parse_args" }), "search \"parse_args\"");
  assert.equal(callText("edit", { path: "new.py", old: "", new: "x = 1\n" }), "create new.py");
  assert.equal(callText("run", { command: "pytest -q\ntests" }), "run pytest -q tests");
  assert.equal(callText("diagnostics", { path: "a.py" }), "diagnostics a.py");
  assert.equal(callText("recall", { pointer: "[t2 read a.py]" }), "recall [t2 read a.py]");
  assert.equal(callText("mystery", { x: 1 }), "mystery {\"x\":1}");
  assert.equal(callText("run", { command: "x".repeat(200) }).length, "run ".length + 80);
});

test("a rejection told to the model, and the final answer with how the turn stopped", () => {
  assert.deepEqual(agentLine({ kind: "told", step: 3, rejection: "unknown tool", text: "There is no tool 'open'.\nUse read." }),
    { kind: "told", step: 3, text: "Told the model: unknown tool", detail: "There is no tool 'open'." });
  assert.deepEqual(agentLine({ kind: "final", answer: "add adds now.", stopped: "finished" }),
    { kind: "final", text: "add adds now.", stopped: "finished", detail: "Finished" });
  assert.equal(agentLine({ kind: "final", answer: "Ran out.", stopped: "deadline" })?.kind, "final");
  assert.equal(stoppedText("step cap"), "Stopped: the step cap was reached");
  assert.equal(stoppedText("new reason"), "Stopped: new reason");
});

const result: AgentResult = {
  threadId: "t", answer: "add adds now.", stopped: "finished", why: "", protocol: "json", protocolSource: "",
  steps: [{ number: 1, calls: [], told: [], promptTokens: 300 }, { number: 2, calls: [], told: [], promptTokens: 400 },
          { number: 3, calls: [], told: [], promptTokens: 500 }],
  edits: [{ path: "calc.py", startLine: 2, endLine: 2 }, { path: "calc.py", startLine: 5, endLine: 5 }],
  usage: { promptTokens: 30, completionTokens: 6 }, window: 8192, limit: 7000, toolsTokens: 200,
  described: 0, rejected: 0,
};

test("a finished turn's summary: how it stopped, its steps, the files edited, the tokens", () => {
  assert.equal(agentSummary(result), "Finished · 3 steps · edited calc.py · 1,200 prompt tokens in all");
  assert.equal(agentSummary({ ...result, stopped: "stuck", why: "the same call three times", answer: "the same call three times",
    steps: result.steps.slice(0, 1), edits: [], rejected: 2 }),
    "Stopped: the agent was stuck · 1 step · no edits · 2 told back · 300 prompt tokens in all");
  assert.equal(agentSummary({ ...result, steps: [] }), "Finished · 0 steps · edited calc.py");
  assert.match(agentSummary({ ...result, stopped: "over budget", why: "the thread is too long", answer: "Start a new thread." }),
    /^Stopped: the next step would not fit the context window \(the thread is too long\) · /);
});

test("the request carries the document, its selection only with it, and the thread to go on in", () => {
  const selection = { start: { line: 0, character: 0 }, end: { line: 2, character: 0 } };
  assert.deepEqual(agentParams("  fix add \n", { uri: "file:///ws/calc.py", selection, threadId: "a1", partialResultToken: "p" }),
    { task: "fix add", partialResultToken: "p", textDocument: { uri: "file:///ws/calc.py" }, selection, threadId: "a1" });
  assert.deepEqual(agentParams("look", { selection, partialResultToken: "p" }), { task: "look", partialResultToken: "p" });
});

// As the server sends an agent's edit: on the version the model read, annotated for confirmation.
const agentEdit: ConfirmableEdit = {
  documentChanges: [{ textDocument: { uri: "file:///ws/calc.py", version: 3 }, edits: [
    { range: { start: { line: 1, character: 13 }, end: { line: 1, character: 14 } }, newText: "+", annotationId: "margin" }] }],
  changeAnnotations: { margin: { label: "Margin's agent", needsConfirmation: true } },
};

test("an edit marked as needing confirmation is recognised, and who asks", () => {
  assert.equal(asksConfirmation(agentEdit), true);
  assert.equal(confirmationLabel(agentEdit), "Margin's agent");
  assert.equal(asksConfirmation({ changeAnnotations: { a: { label: "x", needsConfirmation: false } } }), false);
  assert.equal(asksConfirmation({}), false);
  assert.equal(asksConfirmation(undefined), false);
});

test("confirmed, the same edit no longer asks, and keeps its version and annotations", () => {
  const done = confirmed(agentEdit);
  assert.equal(asksConfirmation(done), false);
  assert.deepEqual(done.documentChanges, agentEdit.documentChanges);
  assert.equal(done.changeAnnotations?.margin.label, "Margin's agent");
  assert.equal(asksConfirmation(agentEdit), true);  // the original is left as it was
});

test("the text after the edit, for the diff, and the lines it changes", () => {
  const texts = new Map([["file:///ws/calc.py", "def add(a, b):\n    return a - b\n"]]);
  const proposed = proposedTexts(agentEdit, texts);
  assert.deepEqual(proposed, [{ uri: "file:///ws/calc.py", version: 3, text: "def add(a, b):\n    return a + b\n",
    firstLine: 2, lastLine: 2 }]);
  assert.equal(confirmationQuestion("Margin's agent", proposed!, (u) => u.split("/").pop()!),
    "Margin's agent asks to edit calc.py (line 2). Apply the change shown in the diff?");
  // Two changes of one document apply one after the other.
  const twice: ConfirmableEdit = { documentChanges: [...agentEdit.documentChanges!, { textDocument: { uri: "file:///ws/calc.py", version: 3 },
    edits: [{ range: { start: { line: 0, character: 4 }, end: { line: 0, character: 7 } }, newText: "plus" }] }] };
  assert.deepEqual(proposedTexts(twice, texts)?.map((p) => [p.text, p.firstLine, p.lastLine]),
    [["def plus(a, b):\n    return a + b\n", 1, 2]]);
  // A document whose text is not known, or an edit that makes a file: no diff.
  assert.equal(proposedTexts(agentEdit, new Map()), undefined);
  assert.equal(proposedTexts({ documentChanges: [{ kind: "create" }] }, texts), undefined);
});
