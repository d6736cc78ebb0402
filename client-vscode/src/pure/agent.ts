// The agent's turn as the chat panel shows it (margin/agent): each streamed event as a line, the
// turn's end as a summary, and the request's params from the editor's state.

import type { AgentEvent, AgentParams, AgentResult, Range } from "./protocol.generated";
import { LspTextEdit, applyTextEdits } from "./textEdits";

/** One line of the agent's turn in the panel. */
export type AgentLine =
  /** a step begins: `text` "Step 2", `detail` its prompt's tokens */
  | { kind: "step"; step: number; text: string; detail: string }
  /** the model's own output, streamed (for small models, its JSON action): shown dimmed */
  | { kind: "text"; step: number; text: string }
  /** a tool call and how it went: `text` what was called, `detail` the result's first line */
  | { kind: "call"; step: number; status: string; text: string; detail: string; pointer: string }
  /** what the model was told instead of a call */
  | { kind: "told"; step: number; text: string; detail: string }
  /** the turn's end: `text` the answer (Markdown), `detail` how it stopped */
  | { kind: "final"; text: string; detail: string; stopped: string };

const STATUS_MARK: Record<string, string> = { done: "✓", failed: "✗", refused: "⊘", repeated: "↻" };

/** The mark a call's status is shown with. */
export function statusMark(status: string): string {
  return STATUS_MARK[status] ?? "•";
}

function shorten(text: string, max: number): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

function firstLine(text: string | null | undefined): string {
  return (text ?? "").split("\n").map((l) => l.trim()).find((l) => l) ?? "";
}

const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined);

/** What a call was, in a few words: `read calc.py:3-9`, `run pytest -q`, `search "parse_args"`. */
export function callText(tool: string, args: Record<string, unknown> | null | undefined): string {
  const a = args ?? {};
  const path = str(a.path);
  switch (tool) {
    case "read": {
      const start = typeof a.start === "number" ? a.start : undefined;
      const end = typeof a.end === "number" ? a.end : undefined;
      const lines = start !== undefined || end !== undefined ? `:${start ?? 1}-${end ?? ""}` : "";
      return `read ${path ?? "?"}${lines}`;
    }
    case "list":
      return `list ${path ?? "."}`;
    case "edit":
      return str(a.old) === "" ? `create ${path ?? "?"}` : `edit ${path ?? "?"}`;
    case "diagnostics":
      return `diagnostics ${path ?? "?"}`;
    case "search":
      return `search "${shorten(str(a.query) ?? "", 60)}"`;
    case "run":
      return `run ${shorten(str(a.command) ?? "", 80)}`;
    case "recall":
      return `recall ${str(a.pointer) ?? "?"}`;
    default: {
      const shown = Object.keys(a).length ? ` ${shorten(JSON.stringify(a), 80)}` : "";
      return `${tool}${shown}`;
    }
  }
}

/** How a turn stopped, for a person. */
export function stoppedText(stopped: string): string {
  switch (stopped) {
    case "finished": return "Finished";
    case "step cap": return "Stopped: the step cap was reached";
    case "stuck": return "Stopped: the agent was stuck";
    case "deadline": return "Stopped: the turn ran out of time";
    case "over budget": return "Stopped: the next step would not fit the context window";
    case "model failed": return "Stopped: the model failed";
    case "rejected": return "Stopped: rejected";
    default: return `Stopped: ${stopped}`;
  }
}

/** One streamed event as a line of the panel (undefined: nothing to show). */
export function agentLine(event: AgentEvent): AgentLine | undefined {
  const step = event.step ?? 0;
  switch (event.kind) {
    case "step": {
      const tokens = event.promptTokens;
      return { kind: "step", step, text: `Step ${step}`,
               detail: tokens == null ? "" : `${tokens.toLocaleString("en-US")} prompt tokens` };
    }
    case "text":
      return event.delta ? { kind: "text", step, text: event.delta } : undefined;
    case "call":
      return { kind: "call", step, status: event.status ?? "", text: callText(event.tool ?? "?", event.args),
               detail: shorten(firstLine(event.summary), 160), pointer: event.pointer ?? "" };
    case "told":
      return { kind: "told", step, text: `Told the model: ${event.rejection ?? "rejected"}`,
               detail: shorten(firstLine(event.text), 160) };
    case "final":
      return { kind: "final", text: event.answer ?? "", stopped: event.stopped ?? "finished",
               detail: stoppedText(event.stopped ?? "finished") };
    default:
      return undefined;
  }
}

/** The line under a finished turn: how it stopped, its steps, the edits made and the tokens. */
export function agentSummary(result: AgentResult): string {
  const parts = [stoppedText(result.stopped)];
  if (result.stopped !== "finished" && result.why && result.why !== result.answer) parts[0] += ` (${result.why})`;
  parts.push(`${result.steps.length} step${result.steps.length === 1 ? "" : "s"}`);
  const edited = [...new Set(result.edits.map((e) => e.path))];
  parts.push(edited.length ? `edited ${edited.join(", ")}` : "no edits");
  if (result.rejected) parts.push(`${result.rejected} told back`);
  // The steps' prompts as Margin counted them (what the step lines show), summed.
  const prompt = result.steps.reduce((sum, s) => sum + (s.promptTokens ?? 0), 0);
  if (prompt > 0) parts.push(`${prompt.toLocaleString("en-US")} prompt tokens in all`);
  return parts.join(" · ");
}

/** margin/agent's params: the task, the active document and its selection, the thread to go on. */
export function agentParams(task: string, options: {
  uri?: string; selection?: Range; threadId?: string; partialResultToken: string;
}): AgentParams {
  const params: AgentParams = { task: task.trim(), partialResultToken: options.partialResultToken };
  if (options.uri) params.textDocument = { uri: options.uri };
  if (options.uri && options.selection) params.selection = options.selection;
  if (options.threadId) params.threadId = options.threadId;
  return params;
}

/** As much of LSP's WorkspaceEdit as a confirmation reads. */
export interface ConfirmableEdit {
  documentChanges?: ({ textDocument: { uri: string; version?: number | null }; edits: (LspTextEdit & { annotationId?: string })[] }
    | { kind: string })[];
  changes?: Record<string, LspTextEdit[]>;
  changeAnnotations?: Record<string, { label: string; needsConfirmation?: boolean; description?: string }>;
}

/** Whether a workspace/applyEdit marks a change as needing the person's confirmation (the
 * agent's edits do, where the editor supports change annotations). */
export function asksConfirmation(edit: ConfirmableEdit | null | undefined): boolean {
  return Object.values(edit?.changeAnnotations ?? {}).some((annotation) => annotation.needsConfirmation === true);
}

/** What asks: the label of the change annotations that need confirmation ("Margin's agent"). */
export function confirmationLabel(edit: ConfirmableEdit): string {
  const labels = [...new Set(Object.values(edit.changeAnnotations ?? {})
    .filter((a) => a.needsConfirmation).map((a) => a.label).filter((l) => l))];
  return labels.join(", ") || "Margin";
}

/** The same edit, its confirmation given: VS Code then applies it without its own preview. */
export function confirmed<E extends ConfirmableEdit>(edit: E): E {
  if (!edit.changeAnnotations) return edit;
  const annotations = Object.fromEntries(Object.entries(edit.changeAnnotations)
    .map(([id, annotation]) => [id, { ...annotation, needsConfirmation: false }]));
  return { ...edit, changeAnnotations: annotations };
}

/** One document's text as the edit would leave it, and the lines (from 1) it changes. */
export interface ProposedText {
  uri: string;
  version: number | null;
  text: string;
  firstLine: number;
  lastLine: number;
}

/** Each document's text after `edit`, from `texts` (its text now, by URI), for a diff; undefined
 * when the edit does more than change text (creates, renames or deletes files) or names a
 * document whose text is not given. */
export function proposedTexts(edit: ConfirmableEdit, texts: ReadonlyMap<string, string>): ProposedText[] | undefined {
  const changes: { uri: string; version: number | null; edits: LspTextEdit[] }[] = [];
  for (const change of edit.documentChanges ?? []) {
    if (!("textDocument" in change)) return undefined;
    changes.push({ uri: change.textDocument.uri, version: change.textDocument.version ?? null, edits: change.edits });
  }
  for (const [uri, edits] of Object.entries(edit.changes ?? {})) changes.push({ uri, version: null, edits });
  const out = new Map<string, ProposedText>();
  for (const change of changes) {
    if (!change.edits.length) continue;
    const before = out.get(change.uri)?.text ?? texts.get(change.uri);
    if (before === undefined) return undefined;
    const lines = change.edits.flatMap((e) => [e.range.start.line, e.range.end.line]);
    const first = Math.min(...lines) + 1;
    const last = Math.max(...lines) + 1;
    const known = out.get(change.uri);
    out.set(change.uri, {
      uri: change.uri, version: known?.version ?? change.version, text: applyTextEdits(before, change.edits),
      firstLine: known ? Math.min(known.firstLine, first) : first, lastLine: known ? Math.max(known.lastLine, last) : last,
    });
  }
  return out.size ? [...out.values()] : undefined;
}

/** The question beside the diff: who asks to change what. */
export function confirmationQuestion(label: string, proposed: readonly ProposedText[], name: (uri: string) => string): string {
  const what = proposed.map((p) => `${name(p.uri)} (${p.firstLine === p.lastLine ? `line ${p.firstLine}` :
    `lines ${p.firstLine}-${p.lastLine}`})`).join(", ");
  return `${label} asks to edit ${what}. Apply the change shown in the diff?`;
}
