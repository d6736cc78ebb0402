// The extension in a real VS Code (code-server) driven by headless Chromium: edit a selection
// through the diff view and save, then chat in the panel and watch the reply stream in with
// the budget bar. Run by tests/e2e/test_vscode.py, which starts the fake model backend, checks
// the file on disk and keeps the screenshots.
//
// Environment: MARGIN_VSCODE_TOOLS (the tools folder), MARGIN_E2E_VSIX, MARGIN_E2E_WORKSPACE
// (holds calc.py), MARGIN_E2E_OUT (screenshots and results.json), MARGIN_E2E_BASE_URL and
// MARGIN_E2E_API_KEY_ENV (the fake backend), MARGIN_E2E_PYTHON (a Python with Margin, for margin.server.pythonPath: a script that
// execs MARGIN_E2E_PYTHON_EXEC), plus the
// MARGIN_* server settings, which reach the server through code-server's environment.

import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { openFile, runCommand, runScenario, screenshot, serverProcesses } from "./harness.mjs";

/** The pids of the Margin servers code-server (group `group`) started; with a signal, sends it. */
const killServer = (group, signal = "SIGKILL") => serverProcesses(group, signal).map(({ pid }) => pid);

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};

await runScenario({
  settings: {
    "margin.chat.maxOutputTokens": 256,
    // Inline completion (its own scenario, inline_completion.mjs) would ask the fake for a
    // suggestion while the settings JSON is typed, and take a reply scripted for the chat.
    "margin.completion.enabled": false,
  },
}, async ({ page, server, userDataDir, workspace, out, results, step }) => {
  // --- Edit Selection… --------------------------------------------------------------------
  await openFile(page, "calc.py");
  const editor = page.locator(".editor-instance .monaco-editor").first();
  await editor.click();
  await page.keyboard.press("Control+Home");
  await page.keyboard.press("Shift+ArrowDown");
  await page.keyboard.press("Shift+ArrowDown");
  step("selected");
  // The server must be running before the command can ask it anything.
  await page.locator(".statusbar-item").filter({ hasText: /gemma|server's model/ }).first()
    .waitFor({ timeout: 60_000 });
  results.server = serverProcesses(server.pid);  // which program runs it, with which PYTHONPATH
  await runCommand(page, "Margin: Edit Selection…");
  const box = page.locator(".quick-input-widget input");
  await box.waitFor({ state: "visible" });
  await box.fill("Rename add to plus");
  await box.press("Enter");
  await page.locator(".monaco-diff-editor").first().waitFor({ timeout: 60_000 });
  const apply = page.locator(".notifications-toasts .monaco-button", { hasText: "Apply" });
  await apply.waitFor({ timeout: 30_000 });
  await page.waitForTimeout(500);  // let the diff render its decorations
  await screenshot(page, join(out, "vscode-diff.png"));
  step("diff");
  await apply.click();
  await page.locator(".notifications-toasts", { hasText: "Margin applied the change." }).waitFor({ timeout: 30_000 });
  step("applied");
  await openFile(page, "calc.py");
  await page.locator(".editor-instance .monaco-editor").first().click();
  await page.keyboard.press("Control+S");
  for (let i = 0; i < 50 && !readFileSync(join(workspace, "calc.py"), "utf8").includes("def plus"); i++) {
    await page.waitForTimeout(200);
  }
  results.saved = readFileSync(join(workspace, "calc.py"), "utf8");
  step("saved");

  // --- Code actions: Margin's are in the lightbulb menu on a selection ----------------------
  await page.keyboard.press("Control+Home");
  await page.keyboard.press("Shift+ArrowDown");
  await page.keyboard.press("Control+.");
  const menu = page.locator(".action-widget").filter({ hasText: "Margin: Simplify" }).first();
  await menu.waitFor({ timeout: 30_000 });
  results.codeActions = (await menu.innerText()).split("\n").filter((line) => line.startsWith("Margin"));
  await page.keyboard.press("Escape");
  step("code actions");

  // --- Chat ---------------------------------------------------------------------------------
  await runCommand(page, "Margin: Open Chat");
  const chat = page.frameLocator("iframe.webview.ready").last().frameLocator("#active-frame");
  const input = chat.locator("#input");
  await input.waitFor({ timeout: 30_000 });
  await input.fill("What does plus do?");
  await input.press("Enter");
  const reply = chat.locator(".message.assistant").last();
  // Streamed: the first words show while the reply is still arriving.
  await chat.locator(".message.assistant.streaming", { hasText: "adds" }).waitFor({ timeout: 30_000 });
  results.partial = await reply.innerText();
  await chat.locator("#budget:not([hidden]) .label").waitFor({ timeout: 30_000 });
  results.reply = await reply.innerText();
  results.replyHtml = await reply.innerHTML();
  results.budgetLabel = await chat.locator("#budget .label").innerText();
  results.segments = await chat.locator("#budget .segment").count();
  results.legend = await chat.locator("#budget .legend").innerText();
  results.status = await page.locator(".statusbar-item").filter({ hasText: /%/ }).first().innerText();
  await runCommand(page, "Notifications: Clear All Notifications");  // nothing over the panel
  await screenshot(page, join(out, "vscode-chat.png"));
  step("chat");

  // --- A setting changed while running reaches the server; Cancel stops a reply -------------
  const userSettings = { path: join(userDataDir, "User", "settings.json"),
    command: "Preferences: Open User Settings (JSON)", marker: "editor.minimap.enabled" };
  // The server's program has the `machine` scope: code-server reads it from the remote settings.
  const remoteSettings = { path: join(userDataDir, "Machine", "settings.json"),
    command: `Preferences: Open Remote Settings (JSON) (127.0.0.1:${server.port})`, marker: "margin.defaults.baseUrl" };
  const settings = JSON.parse(readFileSync(userSettings.path, "utf8"));
  // The server's log (metadata only) says when settings arrive. The user's own settings reach the
  // server at start (a change restarts it): wait for the next start's, and the folder's after them
  // (the restarted server is ready).
  const applied = () => Math.min(...[/settings applied from initializationOptions/g, /settings applied from workspace settings/g]
    .map((pattern) => (readFileSync(env("MARGIN_LOG_FILE"), "utf8").match(pattern) ?? []).length));
  const before = applied();
  // As a person does it: edit the user settings JSON in the editor and save.
  const editSettings = async (wanted, { path: settingsPath, command, marker } = userSettings) => {
    await runCommand(page, command);
    const editor = page.locator(".monaco-editor", { hasText: marker }).last();
    await editor.waitFor();
    for (let attempt = 0; attempt < 3; attempt++) {
      await editor.locator(".view-lines").click();
      await page.waitForTimeout(300);
      await page.keyboard.press("Control+A");
      await page.keyboard.press("Delete");  // typed over a selection, "{" would surround it
      await page.keyboard.insertText(JSON.stringify(wanted, null, 2));
      await page.keyboard.press("Control+S");
      for (let i = 0; i < 25; i++) {
        await page.waitForTimeout(200);
        try {
          if (JSON.stringify(JSON.parse(readFileSync(settingsPath, "utf8"))) === JSON.stringify(wanted)) {
            // Saved. Closing may still ask to save (the editor can lag the disk): it is saved.
            await page.keyboard.press("Control+W");
            const ask = page.locator(".monaco-dialog-box .monaco-button", { hasText: /^Save$/ });
            await ask.click({ timeout: 1500 }).catch(() => {});
            return;
          }
        } catch { /* not saved yet, or saved half-typed */ }
      }
    }
    throw new Error(`could not save ${settingsPath}`);
  };
  await editSettings({ ...settings, "margin.chat.maxOutputTokens": 300 });
  for (let i = 0; i < 100 && applied() === before; i++) await page.waitForTimeout(200);
  results.settingsArrived = applied() > before;
  await input.fill("And minus?");
  await input.press("Enter");
  await chat.locator(".message.assistant.streaming").waitFor({ timeout: 30_000 });
  await chat.locator("#cancel:not([disabled])").click();
  await chat.locator(".note.error", { hasText: "Cancelled" }).waitFor({ timeout: 30_000 });
  results.cancelNote = await chat.locator(".note.error").last().innerText();
  step("cancelled");
  await chat.locator("#new").click();
  await chat.locator(".message").first().waitFor({ state: "detached", timeout: 30_000 });
  results.afterNewThread = await chat.locator(".message").count();
  step("new thread");

  // --- The server dies: the user is told, and it comes back --------------------------------
  const toasts = page.locator(".notifications-toasts");
  await runCommand(page, "Notifications: Clear All Notifications");
  const killed = killServer(server.pid);
  results.killed = killed.length;
  await toasts.filter({ hasText: "The Margin server stopped unexpectedly; restarting it." }).waitFor({ timeout: 30_000 });
  for (let i = 0; i < 100 && killServer(server.pid, 0).length === 0; i++) await page.waitForTimeout(200);
  results.restarted = killServer(server.pid, 0).length === 1;
  step("crash shown");

  // --- margin.server.pythonPath runs that Python's own Margin instead of the bundled one --------
  await runCommand(page, "Notifications: Clear All Notifications");
  const python = env("MARGIN_E2E_PYTHON");
  const backend = JSON.parse(readFileSync(remoteSettings.path, "utf8"));  // the model server's URL and key
  await editSettings({ ...backend, "margin.server.pythonPath": python }, remoteSettings);
  await toasts.locator(".monaco-button", { hasText: "Restart" }).click({ timeout: 30_000 });
  // The setting names a wrapper script that execs MARGIN_E2E_PYTHON_EXEC: wait for that program.
  const byPythonPath = () => serverProcesses(server.pid).filter(({ cmdline }) => cmdline[0] === env("MARGIN_E2E_PYTHON_EXEC"));
  for (let i = 0; i < 300 && byPythonPath().length === 0; i++) await page.waitForTimeout(200);
  results.overridden = byPythonPath();
  step("pythonPath overrides");

  // --- A server that cannot start says so ----------------------------------------------------
  await runCommand(page, "Notifications: Clear All Notifications");
  await editSettings({ ...backend, "margin.server.command": "/nonexistent/margin-lsp" }, remoteSettings);
  await toasts.locator(".monaco-button", { hasText: "Restart" }).click({ timeout: 30_000 });
  const failed = toasts.filter({ hasText: "Margin could not start its server (/nonexistent/margin-lsp)" });
  await failed.waitFor({ timeout: 30_000 });
  results.startFailure = await failed.innerText();
  results.failedStatus = await page.locator(".statusbar-item.has-background-color, .statusbar-item")
    .filter({ has: page.locator(".codicon-error") }).count();
  step("start failure shown");
});
