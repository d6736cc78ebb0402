// Helpers that drive a real VS Code for end-to-end tests: code-server (the real workbench and
// extension host) driven by Debian's headless chromium through playwright-core.
//
// The tools come from scripts/install-vscode-tools.sh; point MARGIN_VSCODE_TOOLS at the folder it
// prints (it holds `code-server` and `node_modules/playwright-core`). Runs on Node >= 20.
import { spawn, execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { closeSync, existsSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

export const CHROMIUM = '/usr/bin/chromium';

/** Chromium flags: the background-networking ones keep it off the (closed) network. */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** User settings written before every start; `settings` given to startCodeServer override them. */
export const DEFAULT_SETTINGS = {
  // Without these two, the chat view opens in the secondary side bar and steals focus.
  'chat.disableAIFeatures': true,
  'workbench.secondarySideBar.defaultVisibility': 'hidden',
  'workbench.startupEditor': 'none',
  'workbench.tips.enabled': false,
  'security.workspace.trust.enabled': false,
  'telemetry.telemetryLevel': 'off',
  'extensions.autoCheckUpdates': false,
  'extensions.autoUpdate': false,
  'extensions.ignoreRecommendations': true,
  'update.mode': 'none',
  'git.enabled': false,
  'files.autoSave': 'off',
  'editor.autoClosingBrackets': 'never',
  'editor.autoClosingQuotes': 'never',
  'editor.autoIndent': 'none',
  'editor.formatOnType': false,
  'editor.acceptSuggestionOnEnter': 'off',
  'editor.quickSuggestions': { other: false, comments: false, strings: false },
  'editor.suggestOnTriggerCharacters': false,
  'editor.parameterHints.enabled': false,
};

const isMac = process.platform === 'darwin';
const MOD = isMac ? 'Meta' : 'Control';

/** The tools folder made by scripts/install-vscode-tools.sh. */
export function toolsDir() {
  const dir = process.env.MARGIN_VSCODE_TOOLS;
  if (!dir) {
    throw new Error(
      'MARGIN_VSCODE_TOOLS is not set: run `bash scripts/install-vscode-tools.sh` and set it to the folder it prints',
    );
  }
  const codeServer = join(dir, 'code-server');
  if (!existsSync(codeServer) || !existsSync(join(dir, 'node_modules', 'playwright-core'))) {
    throw new Error(`MARGIN_VSCODE_TOOLS=${dir} does not hold code-server and node_modules/playwright-core`);
  }
  return resolve(dir);
}

export function codeServerPath() {
  return join(toolsDir(), 'code-server');
}

function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolvePort(port));
    });
  });
}

function groupAlive(pgid) {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}

/** Pids of every live descendant of `pid` (Linux /proc), including ones in other sessions. */
function descendants(pid) {
  const children = new Map();
  let entries = [];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // pid (comm) state ppid ...; comm may hold spaces and parentheses
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (!children.has(ppid)) children.set(ppid, []);
      children.get(ppid).push(Number(entry));
    } catch {
      // gone
    }
  }
  const found = [];
  const queue = [pid];
  while (queue.length) {
    for (const child of children.get(queue.shift()) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}

/**
 * Ends the process group `pgid` (SIGTERM, then SIGKILL after graceMs) and every descendant of its
 * leader, also those that left the group (a terminal's shell, a server started with setsid).
 */
async function killGroup(pgid, graceMs = 5000) {
  const strays = descendants(pgid);
  const signal = (sig) => {
    for (const target of [-pgid, ...strays]) {
      try {
        process.kill(target, sig);
      } catch {
        // already gone
      }
    }
  };
  const anyAlive = () => groupAlive(pgid) || strays.some(alive);
  signal('SIGTERM');
  const deadline = Date.now() + graceMs;
  while (anyAlive() && Date.now() < deadline) await sleep(50);
  if (anyAlive()) {
    signal('SIGKILL');
    const hardDeadline = Date.now() + 5000;
    while (anyAlive() && Date.now() < hardDeadline) await sleep(50);
  }
}

// Process groups of code-servers not stopped yet: killed when this process exits, whatever way.
const liveGroups = new Set();
process.on('exit', () => {
  for (const pgid of liveGroups) {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // gone
    }
  }
});

async function tail(path, lines = 40) {
  try {
    return (await readFile(path, 'utf8')).split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/**
 * Starts code-server in its own process group (setsid) on a free loopback port and waits until
 * it answers HTTP. `settings` are merged over DEFAULT_SETTINGS into userDataDir/User/settings.json;
 * `machineSettings` go to userDataDir/Machine/settings.json, the remote settings: code-server's
 * extension host is a remote one, so settings of `machine` scope (which no workspace can set) are
 * read from there, never from the user settings;
 * `env` is added to code-server's environment, so the extension host (and any language server it
 * starts) inherits it. `trust`: VS Code's workspace trust is on (else every folder is trusted),
 * and a folder not trusted yet opens in Restricted Mode without asking. Output goes to userDataDir/code-server.log.
 * Returns {url, port, pid, logPath, stop()}; stop() ends the whole process group and every
 * process code-server started, even one in a session of its own (a terminal's shell). A group
 * not stopped is killed when this process exits.
 */
export async function startCodeServer({
  workspace,
  extensionsDir,
  userDataDir,
  settings = {},
  machineSettings = {},
  env = {},
  timeoutMs = 60_000,
  trust = false,
} = {}) {
  if (!workspace || !extensionsDir || !userDataDir) {
    throw new Error('startCodeServer needs workspace, extensionsDir and userDataDir');
  }
  const codeServer = codeServerPath();
  await mkdir(join(userDataDir, 'User'), { recursive: true });
  await mkdir(extensionsDir, { recursive: true });
  await writeFile(
    join(userDataDir, 'User', 'settings.json'),
    JSON.stringify({ ...DEFAULT_SETTINGS, ...settings }, null, 2),
  );
  await mkdir(join(userDataDir, 'Machine'), { recursive: true });
  await writeFile(join(userDataDir, 'Machine', 'settings.json'), JSON.stringify(machineSettings, null, 2));
  const port = await freePort();
  const logPath = join(userDataDir, 'code-server.log');
  const logFd = openSync(logPath, 'a');
  const args = [
    '--auth', 'none',
    ...(trust ? [] : ['--disable-workspace-trust']),
    '--disable-telemetry',
    '--disable-update-check',
    '--bind-addr', `127.0.0.1:${port}`,
    // code-server writes a default config.yaml on start: keep it out of ~/.config
    '--config', join(userDataDir, 'code-server-config.yaml'),
    '--extensions-dir', extensionsDir,
    '--user-data-dir', userDataDir,
    resolve(workspace),
  ];
  // detached: true makes the child call setsid(), so it leads a new process group that holds
  // code-server, its extension host, pty host, file watcher and whatever the extension spawns.
  const child = spawn(codeServer, args, {
    detached: true,
    stdio: ['ignore', logFd, logFd],
    env: { ...process.env, ...env },
  });
  closeSync(logFd);
  const pgid = child.pid;
  liveGroups.add(pgid);
  let exited = null;
  child.on('exit', (code, sig) => {
    exited = { code, sig };
  });
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await killGroup(pgid);
    liveGroups.delete(pgid);
  };
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      if (exited) {
        throw new Error(`code-server exited early (${JSON.stringify(exited)}); log ${logPath}:\n${await tail(logPath)}`);
      }
      try {
        const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2000) });
        if (res.ok) break;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) {
        throw new Error(`code-server did not answer on ${url} within ${timeoutMs} ms; log ${logPath}:\n${await tail(logPath)}`);
      }
      await sleep(200);
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, port, pid: pgid, logPath, stop };
}

function run(file, args, options = {}) {
  return new Promise((resolveRun, reject) => {
    execFile(file, args, { maxBuffer: 16 << 20, ...options }, (error, stdout, stderr) => {
      if (error) {
        error.message += `\n${stdout}\n${stderr}`;
        reject(error);
      } else {
        resolveRun({ stdout, stderr });
      }
    });
  });
}

/**
 * Installs a .vsix into extensionsDir (force-replacing an installed version). Returns
 * code-server's output.
 */
export async function installVsix(vsixPath, extensionsDir, { userDataDir } = {}) {
  const scratch = await mkdtemp(join(tmpdir(), 'margin-vsix-'));
  try {
    await mkdir(extensionsDir, { recursive: true });
    const { stdout, stderr } = await run(
      codeServerPath(),
      [
        '--config', join(scratch, 'config.yaml'),
        '--user-data-dir', userDataDir ?? join(scratch, 'user-data'),
        '--extensions-dir', extensionsDir,
        '--install-extension', resolve(vsixPath),
        '--force',
      ],
      { timeout: 120_000 },
    );
    const output = stdout + stderr;
    if (!/successfully installed|already installed/i.test(output)) {
      throw new Error(`installing ${vsixPath} failed:\n${output}`);
    }
    return output;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

let playwrightModule;
async function playwright() {
  playwrightModule ??= await import(
    pathToFileURL(join(toolsDir(), 'node_modules', 'playwright-core', 'index.mjs')).href
  );
  return playwrightModule;
}

/** Debian's headless chromium, launched by playwright-core. */
export async function launchBrowser({ headless = true, args = [] } = {}) {
  const { chromium } = await playwright();
  return chromium.launch({
    executablePath: CHROMIUM,
    headless,
    args: [...CHROMIUM_ARGS, ...args],
  });
}

/**
 * Loads the workbench on `folder` and waits until it is ready: the workbench, the explorer showing
 * the folder, and the status bar.
 */
export async function openWorkbench(page, url, folder, { timeoutMs = 60_000 } = {}) {
  const target = new URL(url);
  target.pathname = '/';
  target.searchParams.set('folder', folder);
  await page.goto(target.href, { waitUntil: 'domcontentloaded', timeout: timeoutMs });
  await page.locator('.monaco-workbench').waitFor({ state: 'visible', timeout: timeoutMs });
  await page.locator('.explorer-folders-view .monaco-list').waitFor({ state: 'visible', timeout: timeoutMs });
  await page.locator('.part.statusbar').waitFor({ state: 'visible', timeout: timeoutMs });
  // The extension host and file service come up after the first paint: wait for the explorer
  // to have rendered the folder (a row, unless the folder is empty) before the first keystroke.
  await page
    .locator('.explorer-folders-view .monaco-list-row')
    .first()
    .waitFor({ state: 'visible', timeout: 10_000 })
    .catch(() => {});
}

/** The quick input widget (command palette / quick open) and its text box. */
const QUICK_INPUT = '.quick-input-widget';
const QUICK_INPUT_BOX = '.quick-input-widget .quick-input-box input';
const QUICK_INPUT_ROW = '.quick-input-widget .quick-input-list .monaco-list-row';

async function openQuickInput(page, key) {
  const widget = page.locator(QUICK_INPUT);
  for (let attempt = 0; attempt < 3; attempt++) {
    await page.keyboard.press(key);
    try {
      await widget.waitFor({ state: 'visible', timeout: 5000 });
      return;
    } catch {
      // the keystroke went to a part that was not ready yet: focus the workbench and retry
      await page.keyboard.press('Escape');
      await page.locator('.monaco-workbench').focus().catch(() => {});
    }
  }
  throw new Error(`the quick input did not open on ${key}`);
}

async function closeQuickInputIfOpen(page) {
  if (await page.locator(QUICK_INPUT).isVisible()) {
    await page.keyboard.press('Escape');
    await page.locator(QUICK_INPUT).waitFor({ state: 'hidden', timeout: 5000 }).catch(() => {});
  }
}

/**
 * Waits until the quick input lists a row whose label (and, when `description` is a string, whose
 * description: '' for none) is exactly the one wanted, then accepts it: Enter when it is the
 * highlighted row, else a click on it. Returns false when no such row showed up in time.
 */
async function acceptQuickInputRow(page, { label, description }, timeoutMs) {
  let index;
  try {
    const handle = await page.waitForFunction(
      ({ selector, label, description }) => {
        for (const row of document.querySelectorAll(selector)) {
          const rowLabel = row.querySelector('.label-name')?.textContent?.trim();
          const rowDescription = row.querySelector('.label-description')?.textContent?.trim() ?? '';
          if (rowLabel === label && (typeof description !== 'string' || rowDescription === description)) {
            return row.getAttribute('data-index');
          }
        }
        return null;
      },
      { selector: QUICK_INPUT_ROW, label, description },
      { timeout: timeoutMs },
    );
    index = await handle.jsonValue();
  } catch {
    return false;
  }
  const row = page.locator(`${QUICK_INPUT_ROW}[data-index="${index}"]`);
  if ((await row.getAttribute('class'))?.split(/\s+/).includes('focused')) {
    await page.keyboard.press('Enter');
  } else {
    await row.click();
  }
  await page.locator(QUICK_INPUT).waitFor({ state: 'hidden', timeout: 10_000 }).catch(() => {});
  return true;
}

async function quickInputRows(page) {
  return page.locator(QUICK_INPUT_ROW).evaluateAll((rows) => rows.map((row) => row.getAttribute('aria-label')));
}

/**
 * Runs a command by its exact title as the command palette shows it, category included
 * (e.g. "File: Save"). The palette ranks fuzzy matches, so this accepts only a row whose label
 * is exactly `title`: a near miss never runs.
 */
export async function runCommand(page, title, { timeoutMs = 10_000 } = {}) {
  await closeQuickInputIfOpen(page);
  await openQuickInput(page, `${MOD}+Shift+P`);
  await page.locator(QUICK_INPUT_BOX).fill(`>${title}`);
  if (!(await acceptQuickInputRow(page, { label: title }, timeoutMs))) {
    const rows = await quickInputRows(page).catch(() => []);
    await closeQuickInputIfOpen(page);
    throw new Error(`command "${title}" not found in the command palette (rows: ${JSON.stringify(rows.slice(0, 8))})`);
  }
}

/**
 * Opens a workspace file by its path relative to the workspace folder with quick open (Ctrl+P)
 * and waits until its editor is active and has the focus. (The first file search of a workspace
 * takes a few seconds.)
 */
export async function openFile(page, relativePath, { timeoutMs = 20_000 } = {}) {
  await closeQuickInputIfOpen(page);
  await openQuickInput(page, `${MOD}+P`);
  await page.locator(QUICK_INPUT_BOX).fill(relativePath);
  const name = relativePath.split('/').pop();
  const dir = dirname(relativePath);
  // a file result shows its name as label and its folder relative to the workspace as
  // description (none for a file at the top)
  if (!(await acceptQuickInputRow(page, { label: name, description: dir === '.' ? '' : dir }, timeoutMs))) {
    const rows = await quickInputRows(page).catch(() => []);
    await closeQuickInputIfOpen(page);
    throw new Error(`quick open found no ${relativePath} (rows: ${JSON.stringify(rows.slice(0, 8))})`);
  }
  await page
    .locator(`.tabs-container .tab.active[data-resource-name="${name}"]`)
    .waitFor({ state: 'visible', timeout: 15_000 });
  await activeEditor(page).locator('.view-lines').waitFor({ state: 'visible', timeout: 15_000 });
  await page.waitForFunction(
    () => document.activeElement?.closest('.editor-group-container.active .monaco-editor') != null,
    null,
    { timeout: 10_000 },
  );
}

/** The text of the ghost text VS Code shows in the active editor (spaces as spaces), or "". */
export async function ghostText(page) {
  return page.evaluate(() => {
    const editor = document.querySelector(".editor-group-container.active .editor-container .monaco-editor");
    const parts = editor ? [...editor.querySelectorAll(".ghost-text-decoration, .ghost-text")] : [];
    return parts.map((part) => part.textContent).join("").replace(/\u00a0/g, " ");
  });
}

/** Line `index` (from 0) of the active editor as shown, with the ghost text in it or, with
 * `withGhost` false, without: the document's text. */
export async function lineText(page, index, withGhost = true) {
  return page.evaluate(({ index, withGhost }) => {
    const editor = document.querySelector(".editor-group-container.active .editor-container .monaco-editor");
    const lines = [...editor.querySelectorAll(".view-lines .view-line")]
      .sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top));
    const line = lines[index]?.cloneNode(true);
    if (!line) return null;
    if (!withGhost) for (const part of line.querySelectorAll(".ghost-text-decoration, .ghost-text")) part.remove();
    return line.textContent.replace(/\u00a0/g, " ");
  }, { index, withGhost });
}

/** Waits until `condition()` (async) is true, checking every 100 ms, for at most `timeoutMs`. */
export async function until(page, condition, what, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await page.waitForTimeout(100);
  }
}

/** The text editor of the active editor group. */
function activeEditor(page) {
  return page.locator('.editor-group-container.active .editor-container .monaco-editor').first();
}

/** Saves a screenshot of the whole page, making its folder first. */
export async function screenshot(page, path) {
  await mkdir(dirname(resolve(path)), { recursive: true });
  await page.screenshot({ path, fullPage: false });
  return path;
}

/**
 * The Margin servers running in process group `group` (code-server's): `margin-lsp`, or a Python
 * running `-m margin.lsp.main`. Each is {pid, cmdline (its arguments), pythonPath (its PYTHONPATH,
 * or null)}; with a signal, sends it to them.
 */
export function serverProcesses(group, signal = null) {
  const found = [];
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const pgid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
      if (pgid !== group) continue;
      const isServer = cmdline.some((arg) => arg.endsWith('margin-lsp')) ||
        cmdline.some((arg, i) => arg === '-m' && cmdline[i + 1] === 'margin.lsp.main');
      if (!isServer) continue;
      const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      const pythonPath = environ.find((entry) => entry.startsWith('PYTHONPATH='))?.slice('PYTHONPATH='.length) ?? null;
      found.push({ pid: Number(pid), cmdline, pythonPath });
    } catch {
      // gone
    }
  }
  if (signal) for (const { pid } of found) process.kill(pid, signal);
  return found;
}

/**
 * Runs one end-to-end scenario as tests/e2e/test_vscode.py starts it: installs MARGIN_E2E_VSIX,
 * starts code-server on MARGIN_E2E_WORKSPACE with no server setting (the extension runs the
 * server it bundles), margin.defaults.baseUrl and apiKeyEnv set to MARGIN_E2E_BASE_URL and
 * MARGIN_E2E_API_KEY_ENV in the remote settings (and `settings` in the user settings), with
 * workspace trust on when `trust` (the workspace then opens untrusted: Restricted Mode) and the
 * extensions of `alsoInstall` (.vsix paths) beside Margin's, opens the workbench in headless
 * Chromium, and calls
 * `body({page, server, userDataDir, workspace, out, results, step})`. `results` (with `steps`,
 * the names given to `step`, and `ok` when `body` returned) goes to MARGIN_E2E_OUT/results.json;
 * on a failure the page is saved as vscode-failure.png there. Exits the process: 0 when `body`
 * returned, 1 when it threw, 3 after `timeoutMs`.
 */
export async function runScenario({ settings = {}, timeoutMs = 240_000, trust = false, alsoInstall = [] } = {}, body) {
  const env = (name) => {
    const value = process.env[name];
    if (!value) throw new Error(`${name} is not set`);
    return value;
  };
  const workspace = env('MARGIN_E2E_WORKSPACE');
  const out = env('MARGIN_E2E_OUT');
  const results = { steps: [] };
  const step = (name) => {
    results.steps.push(name);
    console.log(`step: ${name}`);
  };
  const deadline = setTimeout(() => {
    console.error('timed out');
    process.exit(3);
  }, timeoutMs);
  let server;
  let browser;
  let page;
  try {
    const home = await mkdtemp(join(tmpdir(), 'margin-vscode-'));
    const extensionsDir = join(home, 'extensions');
    const userDataDir = join(home, 'user-data');
    await installVsix(env('MARGIN_E2E_VSIX'), extensionsDir);
    for (const vsix of alsoInstall) await installVsix(vsix, extensionsDir);
    step('installed');
    server = await startCodeServer({
      workspace,
      extensionsDir,
      userDataDir,
      trust,
      settings: {
        'editor.minimap.enabled': false,
        'files.autoSave': 'off',
        ...(trust ? { 'security.workspace.trust.startupPrompt': 'never', 'security.workspace.trust.enabled': true } : {}),
        ...settings,
      },
      // Settings of the `machine` scope (the model server's URL, and the variable of its key: a
      // key goes only to the URL set beside it) go in the remote settings here.
      machineSettings: {
        'margin.defaults.baseUrl': env('MARGIN_E2E_BASE_URL'),
        'margin.defaults.apiKeyEnv': env('MARGIN_E2E_API_KEY_ENV'),
      },
      env: process.env,
    });
    browser = await launchBrowser();
    page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    await openWorkbench(page, server.url, workspace);
    step('workbench');
    await body({ page, server, userDataDir, workspace, out, results, step });
    results.ok = true;
  } catch (error) {
    results.error = String(error && error.stack ? error.stack : error);
    console.error(results.error);
    if (page) await screenshot(page, join(out, 'vscode-failure.png')).catch(() => {});
  } finally {
    await writeFile(join(out, 'results.json'), JSON.stringify(results, null, 2));
    try {
      await browser?.close();
    } catch {
      // already gone
    }
    try {
      await server?.stop();
    } catch {
      // already gone
    }
    clearTimeout(deadline);
  }
  process.exit(results.ok ? 0 : 1);
}
