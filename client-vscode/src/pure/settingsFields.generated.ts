// The server settings the VS Code extension forwards. GENERATED from the server's
// settings model (server/margin/core/settings.py) by scripts/generate_vscode_settings.py:
// do not edit; run `.venv/bin/python scripts/generate_vscode_settings.py`.

/** The profiles with a capability users can reach (USER_VISIBLE_PROFILES). */
export const PROFILES = [
  "completion",
  "edit",
  "chat",
  "chatOps",
  "nextEdit",
  "agent",
] as const;

/** Blocks of profile settings: `defaults`, then each profile. */
export const BLOCKS = [
  "defaults",
  "completion",
  "edit",
  "chat",
  "chatOps",
  "nextEdit",
  "agent",
] as const;

/** The fields of a profile (ProfileSettings). */
export const PROFILE_FIELDS = [
  "enabled",
  "baseUrl",
  "model",
  "apiKeyEnv",
  "contextWindow",
  "maxOutputTokens",
  "temperature",
  "timeoutS",
  "tokenizer",
  "template",
] as const;

/** Settings of no profile (GlobalSettings). */
export const GLOBAL_FIELDS = [
  "database",
  "threadTtlDays",
  "promptsDir",
  "confirmEdits",
  "applyEditTimeoutS",
  "agentConfirmTimeoutS",
  "agentRunPatterns",
  "agentCheckCommand",
  "agentTurnTimeoutS",
  "mcpServers",
  "mcpToolsShare",
  "mcpAutoApproveReadOnly",
  "mcpCallTimeoutS",
  "mcpStartTimeoutS",
  "codeActions",
  "completionMenu",
  "nextEditPauseMs",
  "instructionFiles",
  "instructionsMaxTokens",
  "retrieval",
  "memoryShare",
  "showRequests",
] as const;

/** Profile fields only the user's own settings may set (USER_ONLY): sent at start only. */
export const USER_ONLY_PROFILE_FIELDS = [
  "baseUrl",
  "model",
  "apiKeyEnv",
  "temperature",
  "tokenizer",
  "template",
] as const;

/** Settings of no profile only the user's own settings may set (USER_ONLY): sent at start only. */
export const USER_ONLY_GLOBAL_FIELDS = [
  "database",
  "threadTtlDays",
  "promptsDir",
  "agentRunPatterns",
  "agentCheckCommand",
  "mcpServers",
  "mcpAutoApproveReadOnly",
  "codeActions",
  "nextEditPauseMs",
  "instructionFiles",
] as const;
