// The budget report of a request, as the chat panel and the status bar show it.

import type { Budget } from "./protocol.generated";

export interface Segment {
  name: string;
  tokens: number;
  /** share of the context window, 0–100 */
  percent: number;
}

export interface BudgetView {
  segments: Segment[];
  /** tokens the prompt takes (counted whole when the server counted it) */
  used: number;
  /** share of the window the prompt takes, 0–100, rounded */
  usedPercent: number;
  label: string;
  detail: string[];
}

function formatNumber(n: number): string {
  return n.toLocaleString("en-US");
}

export function budgetView(budget: Budget): BudgetView {
  const window = Math.max(budget.contextWindow, 1);
  const used = budget.counted && budget.counted > 0 ? budget.counted : budget.total;
  const segments: Segment[] = budget.sections
    .filter((s) => s.tokens > 0)
    .map((s) => ({ name: s.name, tokens: s.tokens, percent: (100 * s.tokens) / window }));
  segments.push({ name: "reserved for the reply", tokens: budget.reservedOutput,
                  percent: (100 * budget.reservedOutput) / window });
  const kind = budget.tokenizer.exact ? "exact" : "approximate";
  const label = `${formatNumber(used)} / ${formatNumber(budget.contextWindow)} tokens · ` +
    `${budget.tokenizer.name} (${kind})`;
  const detail = budget.sections.map((s) => {
    const dropped = s.dropped.length ? `; dropped ${s.dropped.map((d) => `${d.item} (${d.reason})`).join(", ")}` : "";
    return `${s.name}: ${formatNumber(s.tokens)}${dropped}`;
  });
  return { segments, used, usedPercent: Math.round((100 * used) / window), label, detail };
}
