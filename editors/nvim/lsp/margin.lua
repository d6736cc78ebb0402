---@brief
---
--- Margin: AI chat, structured edits and inline completion from any OpenAI-compatible
--- endpoint (llama.cpp, vLLM, Ollama, LM Studio, OpenAI, Mistral), within exact token budgets.
---
--- Install `margin-lsp` on your PATH: `pip install margin-lsp` (or `:MasonInstall margin-lsp`).
---
--- Settings go in `init_options` (any field of Margin's settings; the model, where prompts and
--- keys go, code actions and instruction files are taken only from there,
--- `~/.config/margin/settings.json` or `MARGIN_*` environment variables):
--- ```lua
--- vim.lsp.config('margin', {
---   init_options = { defaults = { baseUrl = 'http://127.0.0.1:8080/v1' } },
--- })
--- vim.lsp.enable('margin')
--- ```
--- `settings = { margin = { ... } }` is read through `workspace/configuration` as workspace
--- settings, which a project's files can fill (neoconf), so they may only narrow what
--- `init_options` say: turn a feature off, lower a limit, ask for confirmation. Neovim 0.12's `vim.lsp.inline_completion.enable()` shows Margin's
--- inline suggestions; on older Neovim, `init_options = { completionMenu = true }` offers them
--- in the completion menu. Margin's own requests: `vim.lsp.buf_request_sync(0, 'margin/status', {})`.
---@type vim.lsp.Config
return {
  cmd = { 'margin-lsp' },
  filetypes = {
    'c',
    'cpp',
    'go',
    'java',
    'javascript',
    'javascriptreact',
    'lua',
    'python',
    'ruby',
    'rust',
    'sh',
    'typescript',
    'typescriptreact',
  },
  root_markers = { '.git' },
  settings = {},
}
