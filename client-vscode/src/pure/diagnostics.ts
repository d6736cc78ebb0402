// The editor's problems, forwarded to the server for the agent's `diagnostics` tool
// (margin/diagnostics): VS Code's diagnostics as LSP's, Margin's own left out.

import type { DiagnosticsParams, Problem } from "./protocol.generated";

/** As much of a vscode.Diagnostic as is forwarded. VS Code's severity counts from 0 (Error) to
 * 3 (Hint); LSP's from 1 to 4. */
export interface EditorDiagnostic {
  range: { start: { line: number; character: number }; end: { line: number; character: number } };
  severity: number;
  message: string;
  source?: string;
}

/** Whether a problem is one of Margin's own (never told back to Margin). */
export function isMargins(source: string | undefined): boolean {
  return (source ?? "").trim().toLowerCase() === "margin";
}

export function toProblem(diagnostic: EditorDiagnostic): Problem {
  const { start, end } = diagnostic.range;
  const severity = Math.min(4, Math.max(1, Math.trunc(diagnostic.severity) + 1));
  const problem: Problem = {
    range: { start: { line: start.line, character: start.character }, end: { line: end.line, character: end.character } },
    severity: Number.isFinite(severity) ? severity : 1,
    message: diagnostic.message,
  };
  if (diagnostic.source) problem.source = diagnostic.source;
  return problem;
}

/** The notification for one document: every problem the editor shows in it, but Margin's. */
export function diagnosticsParams(uri: string, diagnostics: readonly EditorDiagnostic[]): DiagnosticsParams {
  return { uri, diagnostics: diagnostics.filter((d) => !isMargins(d.source)).map(toProblem) };
}
