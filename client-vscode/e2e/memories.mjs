// Memories in a real VS Code (code-server) driven by headless Chromium: "Margin: Remember…"
// asks for the fact and its scope and remembers it (twice: this folder, then every workspace);
// "Margin: Memories" lists them newest first with their scopes; choosing one offers to forget
// it, a row's Forget button forgets the other, and the list empties. Run by
// tests/e2e/test_vscode.py, which then checks the SQLite file the server wrote.
//
// Environment: as edit_and_chat.mjs (see runScenario in harness.mjs).

import { openFile, runCommand, runScenario, screenshot, serverProcesses } from "./harness.mjs";
import { join } from "node:path";

const WIDGET = ".quick-input-widget";
const BOX = `${WIDGET} .quick-input-box input`;
const ROW = `${WIDGET} .quick-input-list .monaco-list-row`;
const FACT = "we use pytest, never unittest";

/** The quick input's rows as [label, description] pairs. */
async function rows(page) {
  return page.locator(ROW).evaluateAll((found) => found.map((row) => [
    row.querySelector(".label-name")?.textContent?.trim() ?? "",
    row.querySelector(".label-description")?.textContent?.trim() ?? "",
  ]));
}

/** Waits until the quick input's title holds `text`. */
async function titled(page, text, timeout = 30_000) {
  await page.locator(`${WIDGET} .quick-input-title`, { hasText: text }).waitFor({ timeout });
}

/** "Margin: Remember…" with `fact`, for the scope whose row is labelled `scope`: the scope rows
 * offered, and what the notification said. */
async function remember(page, fact, scope) {
  await runCommand(page, "Margin: Remember…");
  await titled(page, "Margin: Remember");
  await page.locator(BOX).fill(fact);
  await page.keyboard.press("Enter");
  await titled(page, "Margin: Remember it for…");
  const choice = page.locator(ROW, { hasText: scope }).first();
  await choice.waitFor({ timeout: 10_000 });
  const choices = await rows(page);
  await choice.click();
  const note = page.locator(".notifications-toasts .notification-list-item", { hasText: "Margin will keep that in mind" });
  await note.first().waitFor({ timeout: 30_000 });
  const said = (await note.first().innerText()).split("\n").find((line) => line.includes("keep that in mind"));
  await runCommand(page, "Notifications: Clear All Notifications");
  await note.first().waitFor({ state: "detached", timeout: 10_000 });
  return { choices, said };
}

await runScenario({}, async ({ page, server, out, results, step }) => {
  await openFile(page, "calc.py");
  await page.locator(".statusbar-item").filter({ hasText: /gemma|server's model|fake-model/ }).first()
    .waitFor({ timeout: 60_000 });
  step("server running");
  results.server = serverProcesses(server.pid);

  const first = await remember(page, FACT, "This workspace folder");
  results.scopes = first.choices;
  results.remembered = first.said;
  results.rememberedGlobal = (await remember(page, "the API base is /v2", "Every workspace")).said;
  step("remembered");

  await runCommand(page, "Margin: Memories");
  await titled(page, "Margin: 2 memories");
  await page.locator(ROW, { hasText: FACT }).first().waitFor({ timeout: 10_000 });
  results.listed = await rows(page);
  await screenshot(page, join(out, "vscode-memories.png"));
  step("listed");

  // Forget the newest with the second step (Enter on it, then "Forget")...
  await page.locator(ROW, { hasText: "the API base is /v2" }).first().click();
  await titled(page, "Margin: forget");
  await page.locator(ROW, { hasText: "Forget" }).first().click();
  await titled(page, "Margin: 1 memory");
  results.afterSecondStep = await rows(page);
  // ...and the other with its Forget button.
  const row = page.locator(ROW, { hasText: FACT }).first();
  await row.hover();
  await row.locator(".action-label.codicon-trash").click();
  await titled(page, "Margin: No memories yet");
  results.afterForget = await rows(page);
  await page.keyboard.press("Escape");
  step("forgotten");
});
