// Inline completion in a real VS Code (code-server) driven by headless Chromium: typing in
// calc.py brings Margin's suggestion as ghost text (VS Code asks through the language client's
// textDocument/inlineCompletion), Tab accepts it, Ctrl+S saves. Run by tests/e2e/test_vscode.py,
// which starts the fake model backend (its chat replies are the suggestions), checks the file on
// disk and keeps the screenshot vscode-inline.png.
//
// Environment: as edit_and_chat.mjs (see runScenario in harness.mjs); calc.py's second line is
// `    return ` and the scenario types MARGIN_E2E_TYPED at its end.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ghostText, lineText, openFile, runScenario, screenshot, serverProcesses, until } from "./harness.mjs";

const typed = process.env.MARGIN_E2E_TYPED ?? "a";

await runScenario({}, async ({ page, server, workspace, out, results, step }) => {
  const path = join(workspace, "calc.py");
  results.original = readFileSync(path, "utf8");
  await openFile(page, "calc.py");
  // The server must be running before it can suggest anything.
  await page.locator(".statusbar-item").filter({ hasText: /gemma|server's model/ }).first()
    .waitFor({ timeout: 60_000 });
  const editor = page.locator(".editor-group-container.active .editor-container .monaco-editor").first();
  await editor.locator(".view-lines").click();
  await page.keyboard.press("Control+Home");
  await page.keyboard.press("ArrowDown");
  await page.keyboard.press("End");  // after `    return `
  step("cursor placed");

  // Typing is what triggers it: VS Code asks for inline completions as the text changes.
  await page.keyboard.type(typed);
  await until(page, async () => (await ghostText(page)).trim() !== "", "the ghost text", 60_000);
  results.ghost = await ghostText(page);
  results.server = serverProcesses(server.pid);
  results.ghostClasses = await editor.locator(".ghost-text-decoration, .ghost-text").evaluateAll(
    (parts) => parts.map((part) => part.className));
  results.lineWithGhost = await lineText(page, 1);
  await screenshot(page, join(out, "vscode-inline.png"));
  // Still showing after the screenshot: it was on the page when it was taken.
  results.ghostAfterShot = await ghostText(page);
  step("ghost text");

  const typedLine = await lineText(page, 1, false);
  await page.keyboard.press("Tab");
  // Accepted: the suggestion is now text of the line. (VS Code asks again at once; what the model
  // suggests after it may show as new ghost text, which is not the document's.)
  await until(page, async () => (await lineText(page, 1, false)) !== typedLine, "the suggestion to be accepted");
  results.lineTyped = typedLine;
  results.lineAccepted = await lineText(page, 1, false);
  step("accepted");

  await page.keyboard.press("Control+S");
  await until(page, async () => readFileSync(path, "utf8") !== results.original, "calc.py to be saved");
  await page.locator(".tabs-container .tab.active.dirty").waitFor({ state: "detached", timeout: 30_000 });
  results.saved = readFileSync(path, "utf8");
  step("saved");
});
