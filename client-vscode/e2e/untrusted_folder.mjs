// A folder chooses its Python interpreter (its .venv, its settings), so the extension runs the
// bundled server on the Python extension's interpreter only when the folder is trusted. Here a
// stand-in for the Python extension (tests/e2e/test_vscode.py builds it) names the folder's own
// program as the interpreter; with MARGIN_E2E_TRUST=on the workspace opens in Restricted Mode (not
// trusted), else every folder is trusted. The scenario waits for the server to run and reports
// its processes; the test checks whether the folder's program ran.
//
// Environment: as edit_and_chat.mjs (see runScenario in harness.mjs), and MARGIN_E2E_PYTHON_VSIX.

import { openFile, runScenario, serverProcesses } from "./harness.mjs";

const trust = process.env.MARGIN_E2E_TRUST === "on";

await runScenario({ trust, alsoInstall: [process.env.MARGIN_E2E_PYTHON_VSIX] }, async ({ page, server, results, step }) => {
  if (trust) {
    await page.locator(".statusbar-item", { hasText: "Restricted Mode" }).first().waitFor({ timeout: 60_000 });
    step("restricted mode");
  }
  await openFile(page, "calc.py");
  await page.locator(".statusbar-item").filter({ hasText: /gemma|server's model|fake-model/ }).first()
    .waitFor({ timeout: 60_000 });
  step("server running");
  results.server = serverProcesses(server.pid);
});
