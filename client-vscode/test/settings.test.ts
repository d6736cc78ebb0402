import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  BLOCKS, GLOBAL_FIELDS, PROFILE_FIELDS, acceptProbe, folderLevel, pythonCandidates, serverLaunch, serverPythons,
  serverSettings, userLevel,
} from "../src/pure/settings";
import { USER_ONLY_GLOBAL_FIELDS, USER_ONLY_PROFILE_FIELDS } from "../src/pure/settingsFields.generated";

/** The settings (under `margin.`) only the user's own settings may set, e.g. "chat.baseUrl". */
function userOnlyKeys(): string[] {
  return [
    ...BLOCKS.flatMap((block) => USER_ONLY_PROFILE_FIELDS.map((field) => `${block}.${field}`)),
    ...USER_ONLY_GLOBAL_FIELDS,
  ];
}

const packageJson = JSON.parse(readFileSync(join(__dirname, "..", "..", "package.json"), "utf8"));
const contributed: Record<string, { default?: unknown; scope?: string }> = packageJson.contributes.configuration.properties;

function lookup(values: Record<string, unknown>) {
  return (key: string) => values[key];
}

test("only what the user set reaches the server, in the server's shape", () => {
  const settings = serverSettings(lookup({
    "defaults.baseUrl": "http://127.0.0.1:8080/v1",
    "chat.model": "gpt-5", "chat.apiKeyEnv": "OPENAI_API_KEY", "chat.contextWindow": "auto",
    "chatOps.maxOutputTokens": 4096, "edit.enabled": false,
    "completion.model": null, "completion.baseUrl": "  ",
    "confirmEdits": true, "codeActions": [{ title: "Port", instruction: "Port it." }],
    "server.command": "/opt/margin-lsp", "trace.server": "verbose",
  }));
  assert.deepEqual(settings, {
    defaults: { baseUrl: "http://127.0.0.1:8080/v1" },
    chat: { model: "gpt-5", apiKeyEnv: "OPENAI_API_KEY", contextWindow: "auto" },
    chatOps: { maxOutputTokens: 4096 },
    edit: { enabled: false },
    confirmEdits: true,
    codeActions: [{ title: "Port", instruction: "Port it." }],
  });
});

test("where prompts and keys go is sent at start only, never as workspace settings", () => {
  const values = lookup({
    "defaults.baseUrl": "https://api.openai.com/v1", "chat.apiKeyEnv": "OPENAI_API_KEY",
    "chat.model": "gpt-5", "database": "/home/me/threads.db", "promptsDir": "/home/me/prompts",
    "confirmEdits": true,
  });
  assert.deepEqual(serverSettings(values, "workspace"), { confirmEdits: true });
  assert.deepEqual(serverSettings(values, "start"), {
    defaults: { baseUrl: "https://api.openai.com/v1" },
    chat: { apiKeyEnv: "OPENAI_API_KEY", model: "gpt-5" },
    database: "/home/me/threads.db", promptsDir: "/home/me/prompts", confirmEdits: true,
  });
});

test("the server starts with the user's own settings and hears only the folder's own as workspace settings", () => {
  // `.vscode/settings.json` asks for a bigger reply and a model; the user set a smaller reply.
  const levels: Record<string, { globalValue?: unknown; workspaceValue?: unknown }> = {
    "chat.maxOutputTokens": { globalValue: 512, workspaceValue: 100000 },
    "completion.model": { workspaceValue: "o1-pro" },
    "retrieval": { workspaceValue: false },
    "chat.model": { globalValue: "gpt-5" },
  };
  const inspect = (key: string) => levels[key];
  assert.deepEqual(serverSettings(userLevel(inspect)), { chat: { model: "gpt-5", maxOutputTokens: 512 } });
  // The folder's model is never sent; its reply limit is, and the server takes it only if lower.
  assert.deepEqual(serverSettings(folderLevel(inspect), "workspace"), { chat: { maxOutputTokens: 100000 }, retrieval: false });
});

test("the settings sent at start only are exactly the ones no workspace can set", () => {
  const machine = Object.keys(contributed).filter((k) => contributed[k].scope === "machine")
    .filter((k) => !k.startsWith("margin.server."));
  // (VS Code offers no `defaults.enabled` or `defaults.template`: scripts/generate_vscode_settings.py)
  assert.deepEqual(userOnlyKeys().map((k) => `margin.${k}`).filter((k) => k in contributed).sort(), machine.sort());
  assert.ok(userOnlyKeys().includes("chat.baseUrl") && userOnlyKeys().includes("defaults.apiKeyEnv"));
  const restricted: string[] = packageJson.capabilities.untrustedWorkspaces.restrictedConfigurations;
  for (const key of [...machine, "margin.server.command", "margin.server.pythonPath", "margin.server.args"]) {
    assert.equal(contributed[key].scope, "machine", key);
    assert.ok(restricted.includes(key), `${key} is not a restricted configuration`);
  }
});

test("every contributed server setting is forwarded, and its default leaves it unset", () => {
  const forwarded = new Set([
    ...BLOCKS.flatMap((b) => PROFILE_FIELDS.map((f) => `${b}.${f}`)), ...GLOBAL_FIELDS]);
  const serverKeys = Object.keys(contributed).map((k) => k.replace(/^margin\./, ""))
    .filter((k) => !k.startsWith("server.") && !k.startsWith("trace."));
  for (const key of serverKeys) {
    assert.ok(forwarded.has(key), `margin.${key} is contributed but never sent to the server`);
    const value = contributed[`margin.${key}`].default;
    assert.deepEqual(serverSettings(lookup({ [key]: value })), {},
      `the default of margin.${key} must not override the server's own`);
  }
  for (const block of ["edit", "chat", "chatOps"]) {
    for (const field of ["baseUrl", "model", "apiKeyEnv", "contextWindow", "maxOutputTokens"]) {
      assert.ok(`margin.${block}.${field}` in contributed, `margin.${block}.${field} is not contributed`);
    }
  }
});

test("the server runs from the Python interpreter when one is set, else the command, else the bundled one", () => {
  const bundled = { python: "/usr/bin/python3.12", libs: "/ext/bundled/libs" };
  assert.deepEqual(serverLaunch(lookup({})), { command: "margin-lsp", args: [], source: "PATH" });
  assert.deepEqual(serverLaunch(lookup({ "server.command": "" }), bundled),
    { command: "/usr/bin/python3.12", args: ["-m", "margin.lsp.main"], pythonPath: "/ext/bundled/libs", source: "bundled" });
  assert.deepEqual(serverLaunch(lookup({ "server.command": "/opt/bin/margin-lsp", "server.args": ["--log-level", "DEBUG"] }), bundled),
    { command: "/opt/bin/margin-lsp", args: ["--log-level", "DEBUG"], source: "command" });
  assert.deepEqual(serverLaunch(lookup({ "server.command": "x", "server.pythonPath": " /venv/bin/python " }), bundled),
    { command: "/venv/bin/python", args: ["-m", "margin.lsp.main"], source: "pythonPath" });
  assert.deepEqual(serverLaunch(lookup({ "server.args": ["--log-file", "/tmp/m.log"] }), bundled).args,
    ["-m", "margin.lsp.main", "--log-file", "/tmp/m.log"]);
});

test("the bundled server takes a Python the bundle has libraries for, never a free-threaded one", () => {
  const supported = ["3.11", "3.12", "3.13", "3.14"];
  assert.equal(acceptProbe("3 12 0 /usr/bin/python3.12\n", supported), "/usr/bin/python3.12");
  assert.equal(acceptProbe("3 10 0 /usr/bin/python3.10", supported), undefined);
  assert.equal(acceptProbe("3 15 0 /usr/bin/python3.15", supported), undefined);
  assert.equal(acceptProbe("3 13 1 /usr/bin/python3.13t", supported), undefined);
  assert.equal(acceptProbe("pyenv: python3.12: command not found", supported), undefined);
  assert.equal(acceptProbe("3 11 0 C:\\Program Files\\Python311\\python.exe", supported), "C:\\Program Files\\Python311\\python.exe");
  assert.deepEqual(pythonCandidates("linux"), ["python3", "python3.14", "python3.13", "python3.12", "python3.11", "python"]);
  assert.equal(pythonCandidates("win32")[0], "python");
});

test("an untrusted folder's Python interpreter never runs the server", () => {
  const folders = "/repo/.venv/bin/python";
  assert.deepEqual(serverPythons(true, folders, "linux"), [folders, ...pythonCandidates("linux")]);
  assert.deepEqual(serverPythons(false, folders, "linux"), pythonCandidates("linux"));
  assert.ok(!serverPythons(false, folders, "linux").includes(folders));
});
