// Margin for VS Code: starts the Margin language server, and adds the chat panel (with its
// Agent mode, and "Ask the Agent…"), "Edit Selection…" with a diff preview, "Remember…" and
// "Memories", next edits shown where they go (Tab to jump, Tab to accept), the editor's problems
// forwarded for the agent (margin/diagnostics), and a status bar item. Code
// actions (the lightbulb on a selection) and inline completions come through the language
// client as the server offers them.

import * as vscode from "vscode";
import {
  CloseAction,
  ErrorAction,
  LanguageClient,
  LanguageClientOptions,
  RevealOutputChannelOn,
  ServerOptions,
  State,
  TransportKind,
} from "vscode-languageclient/node";
import { ChatPanel } from "./chatPanel";
import { DiagnosticsForwarder } from "./diagnostics";
import { EditConfirmations } from "./editConfirm";
import { ProposalView, editSelection } from "./editSelection";
import { remember, showMemories } from "./memories";
import { NextEdits } from "./nextEdit";
import { METHODS, RecallParams } from "./pure/protocol.generated";
import { BundledServer, Lookup, ServerLaunch, folderLevel, serverLaunch, serverSettings, userLevel } from "./pure/settings";
import { findBundledServer } from "./bundled";
import { request } from "./requests";
import { StatusBar } from "./statusBar";

export interface Margin {
  client: LanguageClient;
  status: StatusBar;
  output: vscode.LogOutputChannel;
  /** the server's edits that wait for the person's Apply / Discard */
  confirmations: EditConfirmations;
  /** the last text editor the user worked in (the chat panel takes focus from it) */
  lastEditor(): vscode.TextEditor | undefined;
}

function config(): (key: string) => unknown {
  const section = vscode.workspace.getConfiguration("margin");
  return (key) => section.get(key);
}

/** The user's own settings the running server was started with (JSON). */
let startedWith = "";

/** The server's settings at one level of VS Code's settings: the user's own, or the folder's. */
function level(which: "user" | "folder"): Lookup {
  const section = vscode.workspace.getConfiguration("margin");
  const inspect = (key: string) => section.inspect(key);
  return which === "user" ? userLevel(inspect) : folderLevel(inspect);
}

function createClient(output: vscode.LogOutputChannel, traceOutput: vscode.LogOutputChannel,
  launch: ServerLaunch, confirmations: EditConfirmations): LanguageClient {
  output.info(`Starting the Margin server (${launch.source === "PATH" ? "margin-lsp on PATH" :
    launch.source === "bundled" ? "bundled" : `margin.server.${launch.source}`}): ${[launch.command, ...launch.args].join(" ")}`);
  const server: ServerOptions = {
    command: launch.command,
    args: launch.args,
    transport: TransportKind.stdio,
    // The bundled server's libraries come first, before whatever the Python has installed.
    options: launch.pythonPath ? { env: { ...process.env, PYTHONPATH: launch.pythonPath } } : undefined,
  };
  let restarts = 0;
  const options: LanguageClientOptions = {
    documentSelector: [{ scheme: "file" }, { scheme: "untitled" }],
    outputChannel: output,
    traceOutputChannel: traceOutput,
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    initializationOptions: JSON.parse(startedWith = JSON.stringify(serverSettings(level("user")))),
    middleware: {
      // Margin gives an inline completion a range only when it replaces text after the cursor;
      // without one it goes at the cursor. VS Code would instead replace from the start of the
      // word at the cursor to the end of the line, and not show a suggestion typed after a word
      // character (`return a` + ` + b`): give it the cursor as its range.
      provideInlineCompletionItems: async (document, position, context, token, next) => {
        const result = await next(document, position, context, token);
        for (const item of (Array.isArray(result) ? result : result?.items) ?? []) {
          item.range ??= new vscode.Range(position, position);
        }
        return result;
      },
      workspace: {
        // The server pulls section "margin": answer with the server's part only.
        configuration: (params, token, next) =>
          params.items.map((item) => (item.section === "margin" ? serverSettings(level("folder"), "workspace") : null)),
        // The agent's edits come marked as needing confirmation: shown in the diff view with
        // Apply / Discard (editConfirm.ts), rather than in the Refactor Preview, unticked.
        handleApplyEdit: (params, next) => confirmations.handle(params, next),
      },
    },
    errorHandler: {
      error: () => ({ action: ErrorAction.Continue }),
      closed: () => {
        restarts += 1;
        const restart = restarts <= 3;
        void vscode.window.showErrorMessage(
          restart ? "The Margin server stopped unexpectedly; restarting it." :
            "The Margin server stopped unexpectedly several times and will not be restarted.",
          "Show Output").then((choice) => choice && output.show());
        return { action: restart ? CloseAction.Restart : CloseAction.DoNotRestart, handled: true };
      },
    },
    initializationFailedHandler: (error) => {
      void vscode.window.showErrorMessage(`Margin could not initialize: ${error}`, "Show Output")
        .then((choice) => choice && output.show());
      return false;
    },
  };
  return new LanguageClient("margin", "Margin", server, options);
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel("Margin", { log: true });
  const traceOutput = vscode.window.createOutputChannel("Margin (trace)", { log: true });
  const status = new StatusBar();
  let editor = vscode.window.activeTextEditor;
  // Looked for once, and only when no setting chooses the server.
  let bundled: Promise<BundledServer | undefined> | undefined;
  const launchNow = async (): Promise<ServerLaunch> => {
    const settings = serverLaunch(config());
    if (settings.source !== "PATH") return settings;
    bundled ??= findBundledServer(context.extensionPath, (line) => output.info(line));
    return serverLaunch(config(), await bundled);
  };
  let launch = await launchNow();
  const proposals = new ProposalView();
  const confirmations = new EditConfirmations(proposals);
  const margin: Margin = {
    client: createClient(output, traceOutput, launch, confirmations),
    status,
    output,
    confirmations,
    lastEditor: () => editor,
  };
  const nextEdits = new NextEdits(() => margin.client);
  const diagnostics = new DiagnosticsForwarder(margin);
  context.subscriptions.push(diagnostics, diagnostics.watch(margin.client), confirmations,
    confirmations.onDidAsk(() => {
      const panel = ChatPanel.open;
      if (panel?.agentRunning) panel.agentNote("Waiting for you: Apply or Discard the change shown in the diff.");
    }));
  context.subscriptions.push(output, traceOutput, status, proposals, nextEdits,
    vscode.window.onDidChangeActiveTextEditor((e) => { if (e && e.document.uri.scheme !== "margin-proposal") editor = e; }));

  const start = async (): Promise<void> => {
    try {
      await margin.client.start();
      await status.refresh(margin.client);
    } catch (error) {
      status.update({ running: false });
      const choice = await vscode.window.showErrorMessage(
        `Margin could not start its server (${[launch.command, ...launch.args].join(" ")}): ${error}. ` +
        (launch.source === "PATH" ? "Install Python 3.11 or newer for the bundled server, or Margin itself, " +
          "or set margin.server.command or margin.server.pythonPath." :
          "Install Margin, or set margin.server.command or margin.server.pythonPath."),
        "Open Settings", "Show Output");
      if (choice === "Open Settings") void vscode.commands.executeCommand("workbench.action.openSettings", "margin.server");
      if (choice === "Show Output") output.show();
    }
  };
  margin.client.onDidChangeState((event) => status.update({ running: event.newState === State.Running }));

  context.subscriptions.push(
    vscode.commands.registerCommand("margin.openChat", () => ChatPanel.show(context, margin)),
    vscode.commands.registerCommand("margin.newThread", () => ChatPanel.show(context, margin).newThread()),
    vscode.commands.registerCommand("margin.askEdit", () => editSelection(margin, proposals)),
    vscode.commands.registerCommand("margin.askAgent", (task?: unknown) => askAgent(context, margin, task)),
    // "Margin: Ask the Agent…" on a selection, beside the server's own code actions.
    vscode.languages.registerCodeActionsProvider({ scheme: "file" }, {
      provideCodeActions: (_document, range) => {
        if (range.isEmpty) return [];
        const action = new vscode.CodeAction("Margin: Ask the Agent…", vscode.CodeActionKind.RefactorRewrite);
        action.command = { command: "margin.askAgent", title: "Margin: Ask the Agent…" };
        return [action];
      },
    }, { providedCodeActionKinds: [vscode.CodeActionKind.RefactorRewrite] }),
    vscode.commands.registerCommand("margin.applyProposal", () => proposals.decide("apply")),
    vscode.commands.registerCommand("margin.discardProposal", () => proposals.decide("discard")),
    vscode.commands.registerCommand("margin.recall", () => recall(margin)),
    vscode.commands.registerCommand("margin.remember", () => remember(margin)),
    vscode.commands.registerCommand("margin.memories", () => showMemories(margin)),
    vscode.commands.registerCommand("margin.cancel", () => status.cancel()),
    vscode.commands.registerCommand("margin.nextEdit.tab", () => nextEdits.tab()),
    vscode.commands.registerCommand("margin.nextEdit.dismiss", () => nextEdits.dismiss()),
    vscode.commands.registerCommand("margin.showOutput", () => output.show()),
    vscode.commands.registerCommand("margin.restartServer", async () => {
      if (margin.client.isRunning()) {
        await margin.client.restart();
        await status.refresh(margin.client);
      } else {
        await start();
      }
    }),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (!event.affectsConfiguration("margin")) return;
      const restart = async (): Promise<void> => {
        await margin.client.dispose();
        launch = await launchNow();
        margin.client = createClient(output, traceOutput, launch, confirmations);
        margin.client.onDidChangeState((e) => status.update({ running: e.newState === State.Running }));
        context.subscriptions.push(diagnostics.watch(margin.client));
        await start();
      };
      if (event.affectsConfiguration("margin.server")) {
        const choice = await vscode.window.showInformationMessage(
          "Margin's server settings changed. Restart the server to use them?", "Restart");
        if (choice === "Restart") await restart();
        return;
      }
      const mine = JSON.stringify(serverSettings(level("user")));
      if (mine !== startedWith) {
        // The user's own settings reach the server at start only (initializationOptions).
        output.info("Your Margin settings changed: restarting the Margin server.");
        await restart();
        return;
      }
      if (margin.client.isRunning()) {
        await margin.client.sendNotification("workspace/didChangeConfiguration",
          { settings: { margin: serverSettings(level("folder"), "workspace") } });
        await status.refresh(margin.client);
      }
    }),
    { dispose: () => void margin.client.stop() },
  );
  await start();
}

export function deactivate(): Thenable<void> | undefined {
  return undefined;
}

/** "Margin: Ask the Agent…": the task (asked for, unless given), then the chat panel in Agent
 * mode runs it on the last editor's document and selection. */
async function askAgent(context: vscode.ExtensionContext, margin: Margin, given?: unknown): Promise<void> {
  const selected = margin.lastEditor()?.selection.isEmpty === false;
  const task = typeof given === "string" ? given : await vscode.window.showInputBox({
    title: "Margin: Ask the Agent",
    prompt: "What should Margin's agent do? It reads, edits and runs commands in this folder, " +
      `asking before every edit or command${selected ? " (the selection is named in the task)" : ""}.`,
    placeHolder: "e.g. fix the failing test in test_calc.py",
    ignoreFocusOut: true,
  });
  if (!task?.trim()) return;
  await ChatPanel.askAgent(context, margin, task.trim());
}

/** Shows what a pointer of the chat's prompts (such as `[t42 parser.py]`) stood for, in a new
 * untitled editor, so it can be read or pasted back into the chat. */
async function recall(margin: Margin): Promise<void> {
  const pointer = await vscode.window.showInputBox({
    prompt: "A pointer from the chat, such as [t42 parser.py]",
    placeHolder: "[t42 parser.py]",
  });
  if (!pointer) {
    return;
  }
  const active = vscode.window.activeTextEditor?.document;
  const params: RecallParams = { pointer };
  if (active && active.uri.scheme === "file") {
    params.textDocument = { uri: active.uri.toString() };
  }
  try {
    const found = await request(margin.client, METHODS.recall, params);
    const document = await vscode.workspace.openTextDocument({ content: found.content, language: "markdown" });
    await vscode.window.showTextDocument(document, { preview: true });
    if (found.changedSince) {
      void vscode.window.showInformationMessage(`${found.fileId} has changed since then.`);
    }
  } catch (error) {
    void vscode.window.showErrorMessage(`Margin: ${error instanceof Error ? error.message : String(error)}`);
  }
}
