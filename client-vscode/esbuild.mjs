// Bundles the extension (Node, CommonJS; `vscode` is provided by the host) and the chat
// panel's script (browser; everything it needs inside it, since the webview loads nothing remote).
import * as esbuild from "esbuild";

await esbuild.build({
  entryPoints: ["src/extension.ts"],
  bundle: true,
  outfile: "dist/extension.js",
  platform: "node",
  format: "cjs",
  target: "node20",
  external: ["vscode"],
  sourcemap: false,
  logLevel: "warning",
});

await esbuild.build({
  entryPoints: ["src/webview/chat.ts"],
  bundle: true,
  outfile: "dist/webview.js",
  platform: "browser",
  format: "iife",
  target: "es2022",
  logLevel: "warning",
});
