import { test } from "node:test";
import assert from "node:assert/strict";
import { diagnosticsParams, isMargins, toProblem } from "../src/pure/diagnostics";

const range = { start: { line: 1, character: 4 }, end: { line: 1, character: 9 } };

test("VS Code's severities (Error 0 … Hint 3) become LSP's (1 … 4)", () => {
  assert.deepEqual([0, 1, 2, 3].map((severity) => toProblem({ range, severity, message: "m" }).severity), [1, 2, 3, 4]);
  assert.deepEqual(toProblem({ range, severity: 0, message: "undefined name 'x'", source: "Pylance" }),
    { range, severity: 1, message: "undefined name 'x'", source: "Pylance" });
  assert.equal("source" in toProblem({ range, severity: 1, message: "m" }), false);
});

test("every problem of the document is sent but Margin's own", () => {
  const params = diagnosticsParams("file:///ws/calc.py", [
    { range, severity: 0, message: "E1", source: "ruff" },
    { range, severity: 1, message: "mine", source: "Margin" },
    { range, severity: 3, message: "hint" },
  ]);
  assert.equal(params.uri, "file:///ws/calc.py");
  assert.deepEqual(params.diagnostics.map((d) => [d.message, d.severity, d.source]),
    [["E1", 1, "ruff"], ["hint", 4, undefined]]);
  assert.deepEqual(diagnosticsParams("file:///ws/ok.py", []), { uri: "file:///ws/ok.py", diagnostics: [] });
  assert.equal(isMargins(" margin "), true);
  assert.equal(isMargins("margin-lint"), false);
  assert.equal(isMargins(undefined), false);
});
