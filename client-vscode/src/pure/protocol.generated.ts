// Margin's protocol: its methods, commands and wire types. GENERATED from the server's
// protocol description (server/margin/lsp/methods.py and the models in lsp/wire*.py) by
// scripts/generate_protocol.py: do not edit; run `.venv/bin/python scripts/generate_protocol.py`.
// docs/protocol.md says what each one is for.

/** Margin's own requests. */
export const METHODS = {
  status: "margin/status",
  chat: "margin/chat",
  explain: "margin/explain",
  history: "margin/history",
  recall: "margin/recall",
  threads: "margin/threads",
  newThread: "margin/newThread",
  deleteThread: "margin/deleteThread",
  remember: "margin/remember",
  forget: "margin/forget",
  memories: "margin/memories",
  editOps: "margin/editOps",
  applyOps: "margin/applyOps",
  nextEdit: "margin/nextEdit",
  agent: "margin/agent",
  approvals: "margin/approvals",
} as const;

/** Margin's commands (workspace/executeCommand; the params are the one argument). */
export const COMMANDS = {
  applyOps: "margin.applyOps",
  editSelection: "margin.editSelection",
} as const;

/** Each request's params and result. */
export interface Requests {
  "margin/status": { params: StatusParams; result: StatusResult };
  "margin/chat": { params: ChatRequestParams; result: ChatResult };
  "margin/explain": { params: ExplainParams; result: ExplainResult };
  "margin/history": { params: HistoryParams; result: HistoryResult };
  "margin/recall": { params: RecallParams; result: RecallResult };
  "margin/threads": { params: ThreadsParams; result: ThreadsResult };
  "margin/newThread": { params: NewThreadParams; result: NewThreadResult };
  "margin/deleteThread": { params: DeleteThreadParams; result: DeleteThreadResult };
  "margin/remember": { params: RememberParams; result: RememberResult };
  "margin/forget": { params: ForgetParams; result: ForgetResult };
  "margin/memories": { params: MemoriesParams; result: MemoriesResult };
  "margin/editOps": { params: ChatRequestParams; result: EditOpsResult };
  "margin/applyOps": { params: ApplyOpsParams; result: ApplyOpsResult };
  "margin/nextEdit": { params: NextEditParams; result: NextEditResult };
  "margin/agent": { params: AgentParams; result: AgentResult };
  "margin/approvals": { params: ApprovalsParams; result: ApprovalsResult };
}

export interface AgentCall {
  tool: string;
  args: Record<string, unknown>;
  status: string;
  pointer: string;
}

export interface AgentEdit {
  path: string;
  startLine: number;
  endLine: number;
}

/** A partial result of margin/agent: one event of a step. */
export interface AgentEvent {
  /**
   * step: a step begins; text: the model's words as they stream; call: a tool call and its
   * status; told: what the model was told instead of a call (a rejection); final: the turn's end
   */
  kind: "step" | "text" | "call" | "told" | "final";
  step?: number | null;
  /** kind text: the next piece */
  delta?: string | null;
  tool?: string | null;
  args?: Record<string, unknown> | null;
  /** kind call: done, failed, refused (not allowed, declined, stale), repeated */
  status?: string | null;
  /** kind call: the pointer the result is kept under, e.g. `[t3 read a.py]` */
  pointer?: string | null;
  /** kind call: the result's first line */
  summary?: string | null;
  /** kind told: malformed, unknown tool, bad arguments, described, one at a time, empty */
  rejection?: string | null;
  text?: string | null;
  answer?: string | null;
  stopped?: string | null;
  /** kind step: the step's prompt, counted exactly */
  promptTokens?: number | null;
}

export interface AgentParams {
  /** what the agent should do (not empty) */
  task: string;
  /** the active document: its workspace folder is where the agent works */
  textDocument?: Document | null;
  /** the selected range of the active document (named in the task) */
  selection?: Range | null;
  position?: Position | null;
  /** an agent thread to continue; without it, a new one */
  threadId?: string | null;
  /** only the tools that read: edits and commands are refused without asking (default `false`) */
  readOnly?: boolean;
  /** stream each step's events as partial results (`$/progress` with this token) */
  partialResultToken?: number | string | null;
  /** report work-done progress with this token (cancellable: the turn stops, its steps kept) */
  workDoneToken?: number | string | null;
}

export interface AgentResult {
  /** the agent thread the steps are kept in */
  threadId: string;
  /** the final answer, or why the turn stopped */
  answer: string;
  stopped: "finished" | "step cap" | "stuck" | "deadline" | "over budget" | "model failed" | "rejected";
  why: string;
  /** how the model acts: native tool calls, one JSON action per step, or actions in its text */
  protocol: "native" | "json" | "text";
  protocolSource: string;
  steps: AgentStep[];
  /** the edits applied, in order */
  edits: AgentEdit[];
  usage: Usage;
  /** the context window the server serves */
  window: number;
  /** what a step's prompt may take */
  limit: number;
  /** what offering the tools costs in every step's prompt */
  toolsTokens: number;
  /** answers that described a call instead of making one */
  described: number;
  /** calls and answers told back to the model as rejected */
  rejected: number;
  /**
   * how the last step's prompt spent the window: system, tools, steps (the results shown as
   * pointers, the steps left out), task
   */
  budget?: Budget | null;
}

export interface AgentStep {
  number: number;
  calls: AgentCall[];
  told: AgentTold[];
  /** the step's prompt, counted exactly; never more than `limit` */
  promptTokens: number;
}

export interface AgentTold {
  kind: string;
  text: string;
}

export interface ApplyOpsParams {
  /** as margin/editOps proposed them */
  ops: Op[];
  /** as margin/editOps gave them */
  baseFingerprints: Record<string, string>;
  /** the selection the ops were asked for */
  selection?: Range | null;
  /** the cursor they were asked at */
  position?: Position | null;
  /** the document they were asked from */
  textDocument?: Document | null;
}

export interface ApplyOpsResult {
  applied: boolean;
  /** the file had changed clear of the ops, and they were moved onto it exactly */
  rebased: boolean;
  /** files that changed where the ops go since they were proposed */
  staleFiles: string[];
  /** why nothing was applied, for a person */
  failureReason?: string | null;
}

export interface Approval {
  /** edit or run */
  tool: string;
  /** exactly the arguments approved */
  args: Record<string, unknown>;
}

export interface ApprovalsParams {
  /** the agent thread (not empty) */
  threadId: string;
  /** approvals to forget first */
  revoke?: Approval[];
}

export interface ApprovalsResult {
  threadId: string;
  /**
   * what the agent may do in this thread without asking ("Always in this thread"), until the
   * server stops
   */
  approvals: Approval[];
  /** the person's agentRunPatterns: commands that run without asking, in every thread */
  patterns: string[];
}

/** The budget report in every chat, edit-ops and explain result. */
export interface Budget {
  /** the model's context window, in tokens */
  contextWindow: number;
  /** tokens kept for the reply (`maxOutputTokens`) */
  reservedOutput: number;
  /** what the prompt may take: the window less the reply's share and a safety margin */
  limit: number;
  /** the engine's sum of its sections */
  total: number;
  tokenizer: Tokenizer;
  sections: Section[];
  /** the final prompt counted whole by the tokenizer (0 when nothing is sent) */
  counted: number;
}

/** A partial result of margin/chat: `$/progress` on the request's partialResultToken. */
export interface ChatDelta {
  /** the reply's next piece of text */
  delta: string;
}

export interface ChatRequestParams {
  /** what the user asks (not empty) */
  message: string;
  /** the active document: its workspace folder picks the thread, and it comes first in the prompt */
  textDocument?: Document | null;
  /** the selected range of the active document, shown to the model as the selection */
  selection?: Range | null;
  /** the cursor in the active document */
  position?: Position | null;
  /** the open documents the prompt may include, by URI; without it, every open document */
  files?: string[] | null;
  /** the thread to continue; without it, the workspace folder's current thread */
  threadId?: string | null;
  /** stream the reply as partial results (`$/progress` with this token) */
  partialResultToken?: number | string | null;
  /** report work-done progress with this token (cancellable) */
  workDoneToken?: number | string | null;
}

export interface ChatResult {
  /** the thread the turn was kept in */
  threadId: string;
  /** the whole reply (empty when nothing was sent) */
  reply: string;
  usage: Usage;
  budget: Budget;
  /** why nothing was sent (over budget, or refused upstream as too large) */
  message?: string | null;
  /** the recall tool's calls, when the model made any */
  recalls?: RecallMade[] | null;
}

export interface CopilotCommand {
  title: string;
  command: string;
  arguments: string[];
}

export interface CopilotDocument {
  uri: string;
  version: number;
}

export interface CopilotInlineEdit {
  text: string;
  textDocument: CopilotDocument;
  range: Range;
  command?: CopilotCommand | null;
}

export interface CopilotInlineEditResult {
  /** alternatives for the one next edit (Margin gives one, or none) */
  edits: CopilotInlineEdit[];
}

export interface DeleteThreadParams {
  /** (not empty) */
  threadId: string;
}

export interface DeleteThreadResult {
  /** false when there was no such thread */
  deleted: boolean;
}

export interface Diagnostic {
  /** zero-based (at least 0) */
  line: number;
  message: string;
  source?: string | null;
  code?: string | null;
  /** zero-based, inclusive (at least 0) */
  endLine?: number | null;
}

export interface DiagnosticsParams {
  /** (not empty) */
  uri: string;
  /** every problem the editor shows in the document now (an empty list: none) */
  diagnostics: Problem[];
}

export interface Document {
  /** the document's URI, as the editor names it (not empty) */
  uri: string;
}

export interface Dropped {
  /** what was left out */
  item: string;
  /** why */
  reason: string;
}

export interface EditOpsResult {
  /** false when the chatOps profile is off */
  enabled: boolean;
  /** the model's explanation, or why there are no ops */
  assistantMessage: string;
  /** the proposed ops: send them back unchanged to apply them */
  ops: Op[];
  /** each file's sha256 (`sha256:…`) as the model saw it, by URI */
  baseFingerprints: Record<string, string>;
  /** {} when nothing was budgeted (the profile is off, or the request could not start) */
  budget: Budget | Record<string, unknown>;
  /** the thread the turn was kept in (null when the request could not start) */
  threadId: string | null;
  /** the proposal as a versioned WorkspaceEdit (LSP JSON), when there is one */
  edit?: Record<string, unknown> | null;
}

export interface EditSelectionResult {
  applied: boolean;
  /** why the editor did not apply the edit, for a person */
  failureReason?: string | null;
  /**
   * true: the model was still working when the command answered; the edit is applied when
   * it is done, and a failure then is shown to the user
   */
  pending?: boolean | null;
}

export interface ExplainParams extends ChatRequestParams {
  /**
   * the profile whose prompt to explain (`agent`: the agent's next step for `message` as its
   * task, in the thread named or a new one) (default `"chat"`)
   */
  profile?: "completion" | "edit" | "chat" | "chatOps" | "nextEdit" | "agent";
}

export interface ExplainResult {
  /** the thread the request would go to */
  threadId: string;
  budget: Budget;
  /** the messages that would be sent, in order */
  messages: Message[];
  /** why nothing would be sent (over budget) */
  message?: string | null;
  /**
   * the tools the request would offer (`recall`, when a pointer is shown and the backend
   * takes tools; the agent's, for the agent profile)
   */
  tools?: string[] | null;
}

export interface FileStatus {
  uri: string;
  /** the editor's version of it */
  version: number;
  /** sha256 of its text */
  fingerprint: string;
  /** as the editor named it */
  languageId: string;
}

export interface ForgetParams {
  /** the memory's id (not empty; at most 100 characters) */
  id: string;
}

export interface ForgetResult {
  /** false when there was no such memory */
  removed: boolean;
}

export interface HistoryMessage {
  id: number;
  /** user or assistant */
  role: string;
  /** what the user typed, or the reply */
  content: string;
  /** epoch seconds */
  createdAt: number;
}

export interface HistoryParams {
  /** the thread; without it, the document's workspace folder's current thread */
  threadId?: string | null;
  /** a document of the workspace folder whose current thread is meant */
  textDocument?: Document | null;
}

export interface HistoryResult {
  threadId: string;
  /** oldest first */
  messages: HistoryMessage[];
}

export interface IndexStatus {
  /** the workspace folder's URI */
  folder: string;
  /**
   * the folder's scan has ended: every file is indexed (while false, requests are answered
   * from what is indexed so far where the index is kept on disk)
   */
  ready: boolean;
  /** files the scan has come to so far */
  filesScanned: number;
  /** of them, taken over unread from the index kept by an earlier run */
  filesReused: number;
  /**
   * files the kept index held as the scan began (about how many the scan will find), or
   * null while it is being opened
   */
  filesExpected: number | null;
}

export interface InlineCompletionContext {
  /** 1: asked for; 2: as the user types (default `2`) */
  triggerKind?: 1 | 2;
  /** set when the editor's completion menu has an item selected: Margin then answers nothing */
  selectedCompletionInfo?: SelectedCompletionInfo | null;
}

export interface InlineCompletionItem {
  /** the suggestion */
  insertText: string;
  /**
   * only when the suggestion replaces text after the cursor; without it the editor inserts at
   * the cursor (Neovim then shows the suggestion inline, not drawn over the rest of the line)
   */
  range?: Range | null;
}

export interface InlineCompletionList {
  /** one suggestion, or none */
  items: InlineCompletionItem[];
}

export interface InlineCompletionRequestParams {
  textDocument: VersionedDocument;
  /** the cursor */
  position: StandardPosition;
  /** (default `{"triggerKind": 2, "selectedCompletionInfo": null}`) */
  context?: InlineCompletionContext;
}

export interface McpIgnored {
  /** a file in a workspace folder that names MCP servers for other tools (`.mcp.json`, ...) */
  file: string;
  /** the names it gives: never run by Margin */
  servers: string[];
}

export interface McpServerStatus {
  name: string;
  /** `settings` (mcpServers), or `client` (an ACP client's session) */
  origin: string;
  /** stdio (a command) or http (a URL) */
  transport: string;
  /** off, needs approval, approved, refused, starting, running, failed, needs the extra */
  state: string;
  /** why, in words: what changed since approved, why it failed, what to install */
  detail: string;
  /** tools offered to the agent */
  tools: number;
  /** tools that changed or appeared since approved: not offered until approved again */
  withheld: string[];
}

export interface MemoriesParams {
  textDocument?: Document | null;
}

export interface MemoriesResult {
  /** the workspace's and the global ones, newest first */
  memories: Memory[];
  /** false when the database could not be used and memories are kept only until Margin stops */
  persistent: boolean;
}

export interface Memory {
  id: string;
  text: string;
  /** workspace or global */
  scope: string;
  /** epoch seconds, as threads' `createdAt` */
  created: number;
}

export interface Message {
  /** system, user, assistant or tool */
  role: string;
  /** the message as sent */
  content: string;
}

export interface NewThreadParams {
  /** a document of the workspace folder the thread is for */
  textDocument?: Document | null;
  title?: string | null;
}

export interface NewThreadResult {
  threadId: string;
}

export interface NextEditDocument {
  /** (not empty) */
  uri: string;
  /** the version the cursor is in: an answer for an older one is empty */
  version: number;
}

export interface NextEdit {
  /** what it replaces, in the document at `version` */
  range: Range;
  newText: string;
}

export interface NextEditParams {
  textDocument: NextEditDocument;
  position: StandardPosition;
}

export interface NextEditResult {
  /** empty: nothing to suggest (`reason` says why) */
  edits: NextEdit[];
  /** where the first edit starts: where Tab takes the cursor */
  jumpTo?: StandardPosition | null;
  /** the document's version the edits are for */
  version: number;
  /** why there is no suggestion */
  reason?: string | null;
}

/** A notification has none. */
export interface NoResult {
}

/**
 * An op on the wire (camelCase, `targetFile` a URI). Values are checked by the op rules,
 * which name the op.
 */
export interface Op {
  /** insert, replace or delete */
  op: string;
  /** the file's URI */
  targetFile: string;
  /** document, selection, cursor, or match (the text in `match`) */
  target: string;
  /** for target `match`: the exact text the op changes */
  match?: string | null;
  /** the new text (insert and replace) */
  content?: string | null;
}

export interface Position {
  /** zero-based (at least 0) */
  line: number;
  /** zero-based, in the position encoding agreed at `initialize` (UTF-16 unless the client offered another) (at least 0) */
  character: number;
}

export interface Problem {
  range: Range;
  /** LSP's: 1 error, 2 warning, 3 information, 4 hint (at least 1; at most 4; default `1`) */
  severity?: number;
  message: string;
  source?: string | null;
}

export interface ProfileStatus {
  enabled: boolean;
  /** null: the backend's default model */
  model: string | null;
  /** the backend's OpenAI-compatible URL */
  baseUrl: string;
  /**
   * whether requests carry the API key `apiKeyEnv` names, and why (or why not): "none
   * configured", "$VAR is set; sent to https://host only", or what keeps it back
   */
  apiKey: string;
  /** null for a disabled profile (not probed); true for a busy backend, with `error` saying so */
  reachable: boolean | null;
  /** the kind of server found: llama.cpp, vllm or openai-compatible; null when not reached */
  backend: string | null;
  /** in tokens */
  contextWindow: number;
  /** where the window came from: the setting, the backend, the model's documentation, or the fallback */
  contextWindowSource: string;
  /** the tokenizer it counts with */
  tokenizer: string;
  /** false when it counts with the heuristic (an upper bound) */
  exact: boolean;
  /** ready, loading, remote (the backend's /tokenize) or `unavailable: <why>` */
  tokenizerState: string;
  /** what is wrong, for a person */
  error: string | null;
  /**
   * the completion profile's route (infill, mistral_fim, completions_suffix, raw_fim, chat),
   * once found; null for the other profiles
   */
  completionRoute?: string | null;
  /**
   * the agent profile's action protocol (native, json, text) and how it was known; null for
   * the other profiles
   */
  agentProtocol?: string | null;
}

export interface Range {
  start: Position;
  /** exclusive */
  end: Position;
}

/** A call of the recall tool in a chat turn. */
export interface RecallMade {
  /** the pointer asked for; null when the call named none */
  pointer: string | null;
  /** recalled, changed since, not found, not a pointer, over budget, over the limit */
  status: string;
  /** what the recalled text took in the prompt */
  tokens: number;
  /** the recalled file's sha256 at that turn */
  fingerprint?: string | null;
}

export interface RecallParams extends HistoryParams {
  /** e.g. `[t42 parser.py]` (the brackets may be left out) (not empty; at most 1000 characters) */
  pointer: string;
}

export interface RecallResult {
  threadId: string;
  /** the pointer, as the thread's prompts write it */
  pointer: string;
  /** exactly what the pointer stood for when it was shown */
  content: string;
  /** the file's name in prompts, when the pointer is to a file */
  fileId?: string | null;
  /** the file's sha256 at that turn */
  fingerprint?: string | null;
  /** for a file: whether it has changed since that turn */
  changedSince?: boolean | null;
}

export interface RememberParams {
  /** stored stripped */
  text: string;
  /** "workspace" (the document's workspace folder) or "global" (every workspace) (default `"workspace"`) */
  scope?: string;
  /** a document of the workspace folder a workspace memory is for */
  textDocument?: Document | null;
}

export interface RememberResult {
  /** the memory's id */
  id: string;
}

export interface Section {
  /** the prompt's part: system, history, summary, snippets, files, memories, message, ... */
  name: string;
  /** what the part takes */
  tokens: number;
  /** how many items were kept */
  kept: number;
  /** the items left out to fit the budget */
  dropped: Dropped[];
}

export interface SelectedCompletionInfo {
  /** the item selected in the editor's completion menu */
  text: string;
}

/**
 * What a Margin code action carries (`data`, or its command's argument) until it is
 * resolved: the selection, the text it was offered on, and what to ask.
 */
export interface SelectionEditData {
  /** the document (not empty) */
  uri: string;
  /** the selection */
  range: Range;
  /**
   * preset: one of Margin's preset instructions; fix: the diagnostics; comment: a
   * `margin: ...` comment in the selection
   */
  kind: "preset" | "fix" | "comment";
  /** the document's sha256 when the action was offered */
  fingerprint?: string | null;
  /** what to ask of the model (default `""`) */
  instruction?: string;
  /** for `fix`: the problems to fix (default `[]`) */
  diagnostics?: Diagnostic[];
}

export interface StandardPosition {
  /** zero-based (at least 0) */
  line: number;
  /** zero-based, in the position encoding agreed at `initialize` (at least 0) */
  character: number;
}

export interface StatusParams {
  /** Probe the backends again instead of reusing a recent probe. (default `false`) */
  refresh?: boolean;
}

export interface StatusResult {
  /** Margin's version */
  version: string;
  /** utf-16, utf-8 or utf-32: the one agreed at `initialize` */
  positionEncoding: string;
  /** each profile by name */
  profiles: Record<string, ProfileStatus>;
  /** the open documents */
  files: FileStatus[];
  /** work running after its request was answered, e.g. `summary <threadId>` */
  background: string[];
  /** each workspace folder's retrieval index, as far as it is built */
  indexes: IndexStatus[];
  /** each MCP server the person configured, and its state (docs/mcp.md) */
  mcpServers: McpServerStatus[];
  /** files of the workspace that name MCP servers Margin does not run */
  mcpIgnored: McpIgnored[];
}

export interface Thread {
  id: string;
  /** the workspace folder's URI */
  workspace: string;
  /** what the thread is for (`chat`) */
  context: string;
  title: string | null;
  /** epoch seconds */
  createdAt: number;
  /** epoch seconds */
  updatedAt: number;
}

export interface ThreadsParams {
  /** a workspace folder's URI; without it, every workspace's threads */
  workspace?: string | null;
}

export interface ThreadsResult {
  threads: Thread[];
  /** false when the thread database cannot be used and threads last until Margin stops */
  persistent: boolean;
}

export interface Tokenizer {
  /** the tokenizer that counted, e.g. `tiktoken:o200k_base`, `llama.cpp`, `heuristic` */
  name: string;
  /** false when counted with the heuristic (an upper bound) */
  exact: boolean;
}

export interface Usage {
  /** as the backend reported them; null when it did not */
  promptTokens: number | null;
  /** as the backend reported them; null when it did not */
  completionTokens: number | null;
}

export interface VersionedDocument {
  /** (not empty) */
  uri: string;
  /** sent by some clients (Copilot's protocol); an answer for an older version is empty */
  version?: number | null;
}
