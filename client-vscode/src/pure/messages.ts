// What the user is told: results of applying, and the status bar's text.

import type { ApplyOpsResult } from "./protocol.generated";

export function applyMessage(result: ApplyOpsResult, name: (uri: string) => string = (u) => u):
    { ok: boolean; text: string } {
  if (result.applied && result.rebased) {
    return { ok: true, text: "Margin applied the change. The file had changed since the proposal, but not " +
      "where the change goes, so it was moved onto your edits exactly." };
  }
  if (result.applied) return { ok: true, text: "Margin applied the change." };
  if (result.staleFiles.length) {
    return { ok: false, text: `Not applied: ${result.staleFiles.map(name).join(", ")} changed where the ` +
      "change goes since it was proposed. Ask again for a fresh proposal." };
  }
  return { ok: false, text: `Not applied: ${result.failureReason ?? "no reason given"}` };
}

export interface StatusState {
  model?: string | null;
  contextWindow?: number | null;
  usedPercent?: number | null;
  /** the server's version (margin/status), shown in the tooltip */
  version?: string | null;
  busy: boolean;
  running: boolean;
}

export function statusText(state: StatusState): { text: string; tooltip: string } {
  if (!state.running) return { text: "$(error) Margin", tooltip: "The Margin server is not running. Click to see its output." };
  const model = state.model || "server's model";
  const use = state.usedPercent == null ? "" : ` · ${state.usedPercent}%`;
  if (state.busy) return { text: `$(sync~spin) Margin${use}`, tooltip: `Margin is working (${model}). Click to cancel.` };
  const window = state.contextWindow ? `, ${state.contextWindow.toLocaleString("en-US")}-token window` : "";
  const last = state.usedPercent == null ? "" : `; the last request used ${state.usedPercent}% of it`;
  const server = state.version ? ` (Margin ${state.version})` : "";
  return { text: `$(comment-discussion) ${model}${use}`,
           tooltip: `Margin: ${model}${window}${last}. Click to open the chat.${server}` };
}

/** An error's message, for a person. */
export function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
