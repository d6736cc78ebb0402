// What the extension sends the server as its `margin` settings: the profile, `defaults` and
// server-wide settings the user has set, and nothing else (the extension's own settings, such
// as margin.server.* and margin.trace.*, are not the server's business and it would reject them).

// The blocks and fields are generated from the server's settings model, as are the settings
// package.json contributes: scripts/generate_vscode_settings.py.

// A folder's settings may only narrow what Margin does (docs/security.md). The extension sends the
// user's own settings (user or remote settings: `inspect().globalValue`) at start, in
// initializationOptions, and restarts the server when one of them changes; as workspace settings
// it sends only what the folder itself sets, which the server takes only where it narrows (turns
// a feature off, lowers a limit, asks for confirmation). The settings only the user may set
// (where prompts, keys and Margin's files go, the model, what is sent in the user's name) have
// VS Code's `machine` scope and are never sent as workspace settings.

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

/** A setting as one level of VS Code's settings holds it (`inspect()`), or undefined. */
export interface Inspected {
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}

/** The user's own value of each setting (user or remote settings), never a folder's: what the
 * server is started with. */
export function userLevel(inspect: (key: string) => Inspected | undefined): Lookup {
  return (key) => inspect(key)?.globalValue;
}

/** What the open folder (or workspace file) itself sets: what the server may only narrow by. */
export function folderLevel(inspect: (key: string) => Inspected | undefined): Lookup {
  return (key) => inspect(key)?.workspaceFolderValue ?? inspect(key)?.workspaceValue;
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
  /** set for the bundled server: its libraries, as PYTHONPATH */
  pythonPath?: string;
  /** what chose it, for the log and the start failure message */
  source: "pythonPath" | "command" | "bundled" | "PATH";
}

/** The server bundled with the extension (client-vscode/bundled): its libraries and a Python
 * found on the machine to run them. */
export interface BundledServer {
  python: string;
  libs: string;
}

/** How to start the server: the Python interpreter of `margin.server.pythonPath` running the
 * module, else the executable of `margin.server.command`, else the bundled server, else
 * `margin-lsp` on PATH (a build without the bundle, or no suitable Python). */
export function serverLaunch(get: Lookup, bundled?: BundledServer): ServerLaunch {
  const extra = Array.isArray(get("server.args")) ? (get("server.args") as unknown[]).map(String) : [];
  const python = get("server.pythonPath");
  if (typeof python === "string" && python.trim()) {
    return { command: python.trim(), args: ["-m", "margin.lsp.main", ...extra], source: "pythonPath" };
  }
  const command = get("server.command");
  if (typeof command === "string" && command.trim()) {
    return { command: command.trim(), args: extra, source: "command" };
  }
  if (bundled) {
    return { command: bundled.python, args: ["-m", "margin.lsp.main", ...extra], pythonPath: bundled.libs, source: "bundled" };
  }
  return { command: "margin-lsp", args: extra, source: "PATH" };
}

/** The Python programs tried, in order, for the bundled server (after the Python extension's
 * interpreter, when it has one). */
export function pythonCandidates(platform: string = process.platform): string[] {
  const versioned = ["3.14", "3.13", "3.12", "3.11"];
  return platform === "win32" ? ["python", "python3", "py"] : ["python3", ...versioned.map((v) => `python${v}`), "python"];
}

/** The Pythons tried, in order, to run the bundled server: the Python extension's interpreter
 * for the folder only when the folder is trusted (a folder chooses it: its `.venv`, its settings),
 * then those on PATH. */
export function serverPythons(trusted: boolean, fromExtension?: string, platform: string = process.platform): string[] {
  return [...(trusted && fromExtension ? [fromExtension] : []), ...pythonCandidates(platform)];
}

/** What a candidate Python prints, run with PROBE_CODE. */
export const PROBE_CODE = "import sys, sysconfig; print(sys.version_info[0], sys.version_info[1], " +
  "int(bool(sysconfig.get_config_var('Py_GIL_DISABLED'))), sys.executable)";

/** The interpreter a probe found, when it is one the bundle has libraries for (`supported`:
 * "3.11", ...; a free-threaded build runs none of them); else undefined. */
export function acceptProbe(stdout: string, supported: readonly string[]): string | undefined {
  const match = /^(\d+) (\d+) ([01]) (.+)$/m.exec(stdout.trim());
  if (!match || match[3] === "1") return undefined;
  return supported.includes(`${match[1]}.${match[2]}`) && match[4].trim() ? match[4].trim() : undefined;
}
