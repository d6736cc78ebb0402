// The agent in a real VS Code (code-server) driven by headless Chromium: "Margin: Ask the
// Agent…" on calc.py, the steps streaming into the chat panel in Agent mode, the agent's edit
// shown in VS Code's diff view and applied with Apply, a second task whose edit is discarded
// (Discard: the server hears no), and a third stopped with Stop. Run by
// tests/e2e/test_vscode.py, which scripts the fake model backend, checks the file on disk and
// what the server sent the model, and keeps the screenshot.
//
// Environment: as edit_and_chat.mjs (MARGIN_VSCODE_TOOLS, MARGIN_E2E_VSIX, MARGIN_E2E_WORKSPACE
// holding calc.py and data.json, MARGIN_E2E_OUT, MARGIN_E2E_BASE_URL, MARGIN_E2E_API_KEY_ENV).

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { lineText, openFile, runCommand, runScenario, screenshot, serverProcesses, until } from "./harness.mjs";

await runScenario({
  settings: {
    // Inline completion would ask the fake for a suggestion and take a reply scripted for the agent.
    "margin.completion.enabled": false,
  },
}, async ({ page, server, workspace, out, results, step }) => {
  /** calc.py's editor (its tab, still open), active. */
  const showCalc = async () => {
    await page.locator('.tabs-container .tab[data-resource-name="calc.py"]').first().click();
    await page.locator('.editor-group-container.active .tabs-container .tab.active[data-resource-name="calc.py"]')
      .waitFor({ timeout: 10_000 });
  };
  // data.json (a trailing comma) is open so that VS Code's JSON support reports a problem in
  // it: the extension forwards it to the server (margin/diagnostics) for the agent's tool.
  await openFile(page, "data.json");
  await openFile(page, "calc.py");
  await page.locator(".statusbar-item").filter({ hasText: /fake-model|server's model/ }).first()
    .waitFor({ timeout: 60_000 });
  results.server = serverProcesses(server.pid);
  step("opened");

  // --- Ask the Agent… as a code action on the selected first line: read, edit, finish -----------
  const editor = page.locator(".editor-instance .monaco-editor").first();
  await editor.click();
  await page.keyboard.press("Control+Home");
  await page.keyboard.press("Shift+ArrowDown");
  await runCommand(page, "Refactor...");
  const offered = page.locator(".action-widget .action-list-item, .action-widget .monaco-list-row",
                               { hasText: "Margin: Ask the Agent…" }).first();
  await offered.waitFor({ timeout: 60_000 });  // the first code action of a busy server: a condition, not a race
  await offered.click();
  const box = page.locator(".quick-input-widget input");
  await box.waitFor({ state: "visible" });
  await box.fill("fix add");
  await box.press("Enter");
  const chat = page.frameLocator("iframe.webview.ready").last().frameLocator("#active-frame");
  const turn = chat.locator(".message.agent").last();
  // The panel opened in Agent mode, the task shown, the first call's line streamed in.
  await chat.locator(".message.user.task", { hasText: "fix add" }).waitFor({ timeout: 30_000 });
  await turn.locator(".agent-line.call.done", { hasText: "read calc.py" }).waitFor({ timeout: 60_000 });
  results.agentModeChecked = await chat.locator("#mode-agent").getAttribute("aria-checked");
  results.stopLabel = await chat.locator("#cancel").innerText();
  results.stopEnabled = await chat.locator("#cancel").isEnabled();
  // The edit waits for the person: the change in VS Code's diff view, beside the panel, and
  // Apply / Discard in a notification (VS Code's Refactor Preview would show it unticked).
  const toasts = page.locator(".notifications-toasts");
  const apply = toasts.locator(".monaco-button", { hasText: /^Apply$/ });
  await apply.waitFor({ timeout: 60_000 });
  results.question = await toasts.locator(".notification-list-item-message", { hasText: "asks to edit" }).innerText();
  const diff = page.locator(".monaco-diff-editor").first();
  await diff.locator(".char-insert, .line-insert").first().waitFor({ timeout: 15_000 });
  results.diffTitle = await page.locator(".tabs-container .tab.active", { hasText: "Margin's agent" }).first().innerText();
  results.waitingNote = await turn.locator(".agent-line.waiting").innerText({ timeout: 10_000 });
  results.refactorPreview = await page.locator(".bulk-edit-panel").count();
  await page.waitForTimeout(500);  // let the diff render its decorations
  await screenshot(page, join(out, "vscode-agent.png"));
  step("confirmation shown");
  await apply.click();
  await turn.locator(".summary").waitFor({ timeout: 60_000 });
  results.turn1 = {
    lines: (await turn.locator(".agent-line:not(.raw)").allInnerTexts()).map((t) => t.replace(/\s+/g, " ").trim()),
    raw: await turn.locator(".agent-line.raw").allInnerTexts(),
    answer: await turn.locator(".answer").innerText(),
    summary: await turn.locator(".summary").innerText(),
  };
  results.stopEnabledAfter = await chat.locator("#cancel").isEnabled();
  step("first turn");
  await showCalc();
  results.bufferAfterApply = await lineText(page, 1, false);
  await screenshot(page, join(out, "vscode-agent-done.png"));

  // --- A second task in the same thread: its edit discarded in the preview ---------------------
  const input = chat.locator("#input");
  await input.fill("add a docstring to add");
  await input.press("Enter");
  const second = chat.locator(".message.agent").nth(1);
  await second.locator(".agent-line.call", { hasText: "diagnostics data.json" }).waitFor({ timeout: 60_000 });
  const discard = toasts.locator(".monaco-button", { hasText: /^Discard$/ });
  await discard.waitFor({ timeout: 60_000 });
  await discard.click();
  await second.locator(".agent-line.call.refused", { hasText: "edit calc.py" }).waitFor({ timeout: 60_000 });
  await second.locator(".summary").waitFor({ timeout: 60_000 });
  results.turn2 = {
    lines: (await second.locator(".agent-line:not(.raw)").allInnerTexts()).map((t) => t.replace(/\s+/g, " ").trim()),
    answer: await second.locator(".answer").innerText(),
    summary: await second.locator(".summary").innerText(),
  };
  step("discarded");

  // --- A third task, stopped with Stop while the model writes --------------------------------
  await input.fill("look at mul");
  await input.press("Enter");
  const third = chat.locator(".message.agent").nth(2);
  await third.locator(".agent-line.raw").waitFor({ timeout: 60_000 });  // the model is writing
  await chat.locator("#cancel:not([disabled])").click();
  await third.locator(".summary").waitFor({ timeout: 30_000 });
  results.turn3 = {
    lines: (await third.locator(".agent-line:not(.raw)").allInnerTexts()).map((t) => t.replace(/\s+/g, " ").trim()),
    summary: await third.locator(".summary").innerText(),
    sendEnabled: await chat.locator("#send").isEnabled(),
  };
  step("stopped");

  // --- Save: the applied edit, and only it, reaches the disk ----------------------------------
  await showCalc();
  results.bufferAtEnd = [await lineText(page, 0, false), await lineText(page, 1, false)];
  await page.locator(".editor-group-container.active .monaco-editor .view-lines").first().click();
  await page.keyboard.press("Control+S");
  await until(page, () => readFileSync(join(workspace, "calc.py"), "utf8").includes("a + b"), "calc.py saved");
  results.saved = readFileSync(join(workspace, "calc.py"), "utf8");
  step("saved");
});
