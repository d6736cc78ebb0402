// Next edits in a real VS Code (code-server) driven by headless Chromium: renaming `r` to
// `radius` in `def area(r):` brings the matching change on the next line, shown where it goes
// (the text it replaces struck through, the line it makes beside it); Tab jumps there, Tab again
// accepts it, Ctrl+S saves. Run by tests/e2e/test_vscode.py, which starts the fake model backend
// (its chat replies are the suggestions), checks the file on disk and keeps the screenshot
// vscode-next-edit.png.
//
// With MARGIN_E2E_NEAR set, the cursor goes before `return` on line 5 instead and VS Code is
// asked for an inline suggestion there (Alt+\\): the same next edit comes as plain
// textDocument/inlineCompletion ghost text, which VS Code's own Tab accepts.
//
// Environment: as edit_and_chat.mjs (see runScenario in harness.mjs); calc.py holds the
// geometry module whose line 4 is `def area(r):`.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ghostText, lineText, openFile, runScenario, screenshot, until } from "./harness.mjs";

const MARK = "Tab ⇥ ";

/** The CSS content of the shown next edit's `after` decoration (the line it makes, drawn by a
 * rule VS Code writes for it), if an element of the editor carries that rule's class; else null. */
async function shownNextEdit(page) {
  return page.evaluate((mark) => {
    const editor = document.querySelector(".editor-group-container.active .editor-container .monaco-editor");
    for (const sheet of document.styleSheets) {
      let rules;
      try { rules = [...sheet.cssRules]; } catch { continue; }
      for (const rule of rules) {
        const content = rule.style?.content ?? "";
        if (!content.includes(mark)) continue;
        const match = /\.([\w-]+)::?after/.exec(rule.selectorText ?? "");
        if (match && editor?.querySelector(`.${CSS.escape(match[1])}`)) {
          return content;
        }
      }
    }
    return null;
  }, MARK);
}

/** The cursor as the status bar shows it ("Ln 5, Col 25"). */
async function cursorShown(page) {
  const item = page.locator(".statusbar-item").filter({ hasText: /Ln \d+, Col \d+/ }).first();
  return (await item.textContent())?.match(/Ln \d+, Col \d+/)?.[0] ?? null;
}

const settings = {
  "margin.nextEdit.enabled": true,
  "margin.completion.enabled": false,
  "margin.nextEditPauseMs": 300,
};

await runScenario({ settings }, async ({ page, workspace, out, results, step }) => {
  const path = join(workspace, "calc.py");
  results.original = readFileSync(path, "utf8");
  await openFile(page, "calc.py");
  await page.locator(".statusbar-item").filter({ hasText: /gemma|server's model/ }).first()
    .waitFor({ timeout: 60_000 });
  const editor = page.locator(".editor-group-container.active .editor-container .monaco-editor").first();
  await editor.locator(".view-lines").click();
  await page.keyboard.press("Control+Home");
  for (let i = 0; i < 3; i++) await page.keyboard.press("ArrowDown");
  await page.keyboard.press("End");
  await page.keyboard.press("ArrowLeft");
  await page.keyboard.press("ArrowLeft"); // after the `r` of `def area(r):`
  step("cursor placed");

  const typed = process.env.MARGIN_E2E_TYPED ?? "adius";
  await page.keyboard.type(typed);
  // Read once the editor shows every typed key (it draws them a frame or more later).
  await until(page, async () => (await lineText(page, 3, false))?.includes(`${typed}):`), "the typed text");
  results.typedLine = await lineText(page, 3, false);
  if (process.env.MARGIN_E2E_NEAR) {
    await page.keyboard.press("ArrowDown");
    await page.keyboard.press("Home"); // before `return` (after the indentation)
    await page.keyboard.press("Alt+Backslash"); // Trigger Inline Suggestion
    await until(page, async () => (await ghostText(page)).trim() !== "", "the ghost text", 60_000);
    results.ghost = await ghostText(page);
    results.lineBefore = await lineText(page, 4, false);
    await screenshot(page, join(out, "vscode-next-edit-near.png"));
    step("ghost text");
    await page.keyboard.press("Tab");
    await until(page, async () => (await lineText(page, 4, false)) !== results.lineBefore, "the ghost text to be accepted");
    results.lineAccepted = await lineText(page, 4, false);
    step("accepted");
    await page.keyboard.press("Control+S");
    await until(page, async () => readFileSync(path, "utf8") !== results.original, "calc.py to be saved");
    results.saved = readFileSync(path, "utf8");
    step("saved");
    return;
  }
  await until(page, async () => (await shownNextEdit(page)) !== null, "the next edit to be shown", 60_000);
  results.shown = await shownNextEdit(page);
  results.cursorBefore = await cursorShown(page);
  await screenshot(page, join(out, "vscode-next-edit.png"));
  step("shown");

  await page.keyboard.press("Tab");
  await until(page, async () => (await cursorShown(page)) !== results.cursorBefore, "the jump");
  results.cursorAfterJump = await cursorShown(page);
  results.lineAfterJump = await lineText(page, 4, false);
  step("jumped");

  await page.keyboard.press("Tab");
  await until(page, async () => (await lineText(page, 4, false)) !== results.lineAfterJump, "the edit to be accepted");
  results.lineAccepted = await lineText(page, 4, false);
  results.shownAfterAccept = await shownNextEdit(page);
  step("accepted");

  await page.keyboard.press("Control+S");
  await until(page, async () => readFileSync(path, "utf8") !== results.original, "calc.py to be saved");
  results.saved = readFileSync(path, "utf8");
  step("saved");
});
