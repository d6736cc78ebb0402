// What the extension sends the server as its `margin` settings: the profile, `defaults` and
// server-wide settings the user has set, and nothing else (the extension's own settings, such
// as margin.server.* and margin.trace.*, are not the server's business and it would reject them).

// The blocks and fields are generated from the server's settings model, as are the settings
// package.json contributes: scripts/generate_vscode_settings.py.

// Where prompts, API keys and Margin's files go (every baseUrl and apiKeyEnv, database,
// promptsDir) is the user's alone to say: VS Code reads those settings from user (or remote)
// settings only (their `machine` scope), the extension sends them at start only, in
// initializationOptions, and restarts the server when one changes. The server never takes them
// from workspace settings, whoever sends those (docs/security.md).

import {
  BLOCKS,
  GLOBAL_FIELDS,
  PROFILE_FIELDS,
  USER_ONLY_GLOBAL_FIELDS,
  USER_ONLY_PROFILE_FIELDS,
} from "./settingsFields.generated";

export { BLOCKS, GLOBAL_FIELDS, PROFILE_FIELDS, PROFILES } from "./settingsFields.generated";

/** Reads a setting under `margin.` (e.g. "chat.model"); undefined or null when unset. */
export type Lookup = (key: string) => unknown;

function isSet(value: unknown): boolean {
  return value !== undefined && value !== null && !(typeof value === "string" && value.trim() === "");
}

/** The settings (under `margin.`) only the user's own settings may set, e.g. "chat.baseUrl". */
export function userOnlyKeys(): string[] {
  return [
    ...BLOCKS.flatMap((block) => USER_ONLY_PROFILE_FIELDS.map((field) => `${block}.${field}`)),
    ...USER_ONLY_GLOBAL_FIELDS,
  ];
}

/** The server's settings the user has set. `at` says where they go: `start`
 * (initializationOptions) carries every one; `workspace` (workspace/configuration and
 * didChangeConfiguration) leaves out the user-only ones, which travel at start only. */
export function serverSettings(get: Lookup, at: "start" | "workspace" = "start"): Record<string, unknown> {
  const settings: Record<string, unknown> = {};
  const profileFields = PROFILE_FIELDS.filter((f) => at === "start" || !(USER_ONLY_PROFILE_FIELDS as readonly string[]).includes(f));
  const globalFields = GLOBAL_FIELDS.filter((f) => at === "start" || !(USER_ONLY_GLOBAL_FIELDS as readonly string[]).includes(f));
  for (const block of BLOCKS) {
    const values: Record<string, unknown> = {};
    for (const field of profileFields) {
      const value = get(`${block}.${field}`);
      if (isSet(value)) values[field] = value;
    }
    if (Object.keys(values).length > 0) settings[block] = values;
  }
  for (const field of globalFields) {
    const value = get(field);
    if (isSet(value)) settings[field] = value;
  }
  return settings;
}

export interface ServerLaunch {
  command: string;
  args: string[];
}

/** How to start the server: a Python interpreter running the module, or the executable. */
export function serverLaunch(get: Lookup): ServerLaunch {
  const extra = Array.isArray(get("server.args")) ? (get("server.args") as unknown[]).map(String) : [];
  const python = get("server.pythonPath");
  if (typeof python === "string" && python.trim()) {
    return { command: python.trim(), args: ["-m", "margin.lsp.main", ...extra] };
  }
  const command = get("server.command");
  return { command: typeof command === "string" && command.trim() ? command.trim() : "margin-lsp", args: extra };
}
