// The Margin server bundled with the extension: bundled/libs holds Margin and its libraries for
// this platform and several Pythons (scripts/bundle_vscode_server.py writes it, and
// bundled/manifest.json says which Pythons). It runs as `<python> -m margin.lsp.main` with
// PYTHONPATH=bundled/libs, on a Python found here: the Python extension's interpreter when it
// has one and the folder is trusted (a folder chooses that interpreter: its `.venv`, its
// settings), else python3, python3.14 … python3.11 on PATH — the first the bundle has libraries for.

import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import * as vscode from "vscode";
import { BundledServer, PROBE_CODE, acceptProbe, pythonCandidates, serverPythons } from "./pure/settings";

interface Manifest {
  target: string;
  pythons: string[];
}

function probe(python: string, supported: readonly string[]): Promise<string | undefined> {
  return new Promise((resolve) => {
    // A Python that hangs is not one to run the server with.
    execFile(python, ["-c", PROBE_CODE], { timeout: 15_000, windowsHide: true }, (error, stdout) =>
      resolve(error ? undefined : acceptProbe(stdout, supported)));
  });
}

/** The Python extension's interpreter for the workspace, if that extension is installed. */
async function pythonExtensionInterpreter(): Promise<string | undefined> {
  const extension = vscode.extensions.getExtension("ms-python.python");
  if (!extension) return undefined;
  try {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const api: any = extension.isActive ? extension.exports : await extension.activate();
    const environments = api?.environments;
    const active = environments?.getActiveEnvironmentPath?.(vscode.workspace.workspaceFolders?.[0]?.uri);
    const resolved = active && await environments.resolveEnvironment?.(active);
    const path = resolved?.executable?.uri?.fsPath ?? active?.path;
    return typeof path === "string" && path ? path : undefined;
  } catch {
    return undefined;
  }
}

/** The bundled server with a Python to run it, or undefined (no bundle in this build, or no
 * suitable Python); `log` says what was tried. */
export async function findBundledServer(extensionPath: string, log: (line: string) => void):
  Promise<BundledServer | undefined> {
  const libs = join(extensionPath, "bundled", "libs");
  const manifestPath = join(extensionPath, "bundled", "manifest.json");
  if (!existsSync(libs) || !existsSync(manifestPath)) {
    log("This build of the extension has no bundled server.");
    return undefined;
  }
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as Manifest;
  const trusted = vscode.workspace.isTrusted;
  const fromExtension = trusted ? await pythonExtensionInterpreter() : undefined;
  if (!trusted) log("The folder is not trusted: its Python interpreter is not used to run the server.");
  const candidates = serverPythons(trusted, fromExtension);
  for (const candidate of candidates) {
    const python = await probe(candidate, manifest.pythons);
    if (python) {
      log(`The bundled server (${manifest.target}) runs with ${python} (found as ${candidate}).`);
      return { python, libs };
    }
  }
  log(`No Python ${manifest.pythons.join(", ")} found (tried ${candidates.join(", ")}) to run the bundled server.`);
  return undefined;
}
