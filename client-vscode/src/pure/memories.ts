// Memories as the extension shows them: the QuickPick's items, the scope choices, and the
// checks "Margin: Remember…" makes before asking the server (which checks again, by the same
// rules: text stripped, non-empty, at most 2,000 characters).

import type { MemoriesResult, Memory, RememberParams } from "./protocol.generated";

export type Scope = "workspace" | "global";

export const MAX_MEMORY_CHARS = 2000;

/** Why `text` cannot be remembered, or undefined when it can (the input box shows this). */
export function memoryProblem(text: string): string | undefined {
  const stripped = text.trim();
  if (!stripped) return "Write the fact Margin should keep in mind.";
  const length = [...stripped].length; // characters, as the server counts them (not UTF-16 units)
  if (length > MAX_MEMORY_CHARS) {
    return `A memory holds at most ${MAX_MEMORY_CHARS.toLocaleString("en-US")} characters; this one has ` +
      `${length.toLocaleString("en-US")}.`;
  }
  return undefined;
}

export interface ScopeChoice {
  label: string;
  description: string;
  scope: Scope;
}

/** What "Margin: Remember…" offers: this workspace folder first when there is one. */
export function scopeChoices(folder: string | undefined): ScopeChoice[] {
  const everywhere = { label: "Every workspace", description: "global", scope: "global" as const };
  if (!folder) return [everywhere];
  return [{ label: "This workspace folder", description: folder, scope: "workspace" }, everywhere];
}

/** margin/remember's params: the active document (a file) names the workspace folder. */
export function rememberParams(text: string, scope: Scope, documentUri?: string): RememberParams {
  const params: RememberParams = { text: text.trim(), scope };
  if (documentUri && documentUri.startsWith("file:")) params.textDocument = { uri: documentUri };
  return params;
}

/** How long ago `created` was, for a person ("just now", "5 minutes ago", "3 days ago", a date). */
export function ago(created: number, nowSeconds: number): string {
  const seconds = Math.max(0, nowSeconds - created);
  const units: [number, string][] = [[86400, "day"], [3600, "hour"], [60, "minute"]];
  if (seconds < 60) return "just now";
  if (seconds >= 30 * 86400) return new Date(created * 1000).toISOString().slice(0, 10);
  for (const [size, name] of units) {
    if (seconds >= size) {
      const count = Math.floor(seconds / size);
      return `${count} ${name}${count === 1 ? "" : "s"} ago`;
    }
  }
  return "just now";
}

export interface MemoryItem {
  id: string;
  label: string;
  description: string;
  detail: string;
}

/** The QuickPick's items, in the server's order (newest first): the text's first line as the
 * label, the scope beside it, and the rest of the text (if any) and its age below. */
export function memoryItems(memories: Memory[], nowSeconds: number): MemoryItem[] {
  return memories.map((memory) => {
    const [first, ...rest] = memory.text.split("\n");
    const more = rest.join(" ").trim();
    const when = `remembered ${ago(memory.created, nowSeconds)}`;
    return {
      id: memory.id,
      label: first,
      description: memory.scope === "global" ? "global" : "this workspace",
      detail: more ? `${more} · ${when}` : when,
    };
  });
}

/** The QuickPick's title: how many, and a warning when they are not being saved. */
export function memoriesTitle(result: MemoriesResult): string {
  const count = result.memories.length;
  const what = count === 0 ? "No memories yet" : `${count} ${count === 1 ? "memory" : "memories"}`;
  return `Margin: ${what}` + (result.persistent ? "" : " (not saved: the database cannot be used)");
}
